"""Index consistency: interrupted ingests are detected, resumed or rolled back; the
lexical side is rebuilt when it does not match Chroma."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from sleuth.corpus.models import Document
from sleuth.errors import IndexIncompleteError, InputError
from sleuth.index import Index
from sleuth.index.manifest import IndexManifest
from sleuth.index.update import read_stale
from sleuth.tools.toolbox import Toolbox
from tests.fakes import CrashingEmbedder


def _docs(n: int, words: int = 60) -> list[Document]:
    return [
        Document(id=f"doc{i}.t", text=" ".join(f"w{i}x{j} topic{j % 9}." for j in range(words)))
        for i in range(n)
    ]


def test_interrupted_ingest_is_detected_then_resumed(tmp_path):
    docs = _docs(40)
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=64)
    index._embedder = CrashingEmbedder(ok_batches=3)
    with pytest.raises(KeyboardInterrupt):
        index.ingest(docs, batch_size=8)
    partial = index.collection.count()
    assert 0 < partial < sum(1 for _ in docs) * 2
    with pytest.raises(IndexIncompleteError, match="interrupted"):
        Index.open(tmp_path / "ix")
    resumed = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=64)
    stats = resumed.ingest(docs, batch_size=8)
    assert stats.resumed_chunks == partial  # nothing embedded twice
    fresh = Index.create(tmp_path / "ref", embedder="hash:64", chunk_tokens=64)
    fresh.ingest(docs)
    done = Index.open(tmp_path / "ix")
    assert sorted(r.id for r in done.lexical.rows) == sorted(
        r.id for r in Index.open(tmp_path / "ref").lexical.rows
    )
    assert done.collection.count() == len(done.lexical.rows)


def test_interrupted_ingest_of_other_inputs_must_be_resumed_or_repaired(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=64)
    index.ingest(_docs(5))
    index._embedder = CrashingEmbedder(ok_batches=1)
    extra = [Document(id=f"new{i}.t", text=f"fresh text number {i} " * 30) for i in range(20)]
    with pytest.raises(KeyboardInterrupt):
        index.ingest(extra, batch_size=4)
    again = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=64)
    with pytest.raises(IndexIncompleteError, match="other inputs"):
        again.ingest(_docs(3))
    stats = again.repair()
    assert stats.rolled_back_documents == 20
    reopened = Index.open(tmp_path / "ix")
    assert set(reopened.documents) == {d.id for d in _docs(5)}
    assert reopened.collection.count() == len(reopened.lexical.rows)


def test_stale_or_missing_lexical_side_is_rebuilt_on_open(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=64)
    index.ingest(_docs(6))
    expected = sorted(r.id for r in Index.open(tmp_path / "ix").lexical.rows)
    shutil.rmtree(tmp_path / "ix" / "lexical-1")
    assert sorted(r.id for r in Index.open(tmp_path / "ix").lexical.rows) == expected
    text = tmp_path / "ix" / "lexical-1" / "text.bin"
    text.write_bytes(text.read_bytes()[:-3])  # truncated: refused, then rebuilt from Chroma
    reopened = Index.open(tmp_path / "ix")
    assert sorted(r.id for r in reopened.lexical.rows) == expected
    assert Toolbox(reopened).search_corpus("topic3").chunks


def test_reingesting_a_changed_document_replaces_its_chunks(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32)
    index.ingest([Document(id="d.t", text="long text. " * 200)])
    index.ingest([Document(id="d.t", text="now short.")])
    reopened = Index.open(tmp_path / "ix")
    assert [r.text for r in reopened.document_chunks("d.t")] == ["now short."]
    stale = read_stale(tmp_path / "ix")  # the old rows outlive the update by one generation
    assert len(stale) > 1 and reopened.collection.count() == 1 + len(stale)
    again = index.ingest([Document(id="d.t", text="now short.")])
    assert (again.unchanged, again.resumed_chunks) == (1, 0)
    assert index.collection.count() == 1  # the next update deleted them


def test_settings_mismatch_and_non_index_folder(tmp_path):
    Index.create(tmp_path / "ix", embedder="hash:64").ingest(_docs(2))
    with pytest.raises(InputError, match="embedder"):
        Index.create(tmp_path / "ix", embedder="minilm")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("x")
    with pytest.raises(InputError, match="not a sleuth index"):
        Index.create(tmp_path / "other")
    with pytest.raises(InputError, match="not a sleuth index"):
        Index.open(tmp_path / "nothing")


def test_sigkill_during_cli_ingest_then_resume(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    with open(corpus, "w") as f:
        for d in _docs(400, words=80):
            f.write(json.dumps(d.model_dump()) + "\n")
    ix = tmp_path / "ix"
    cmd = [
        sys.executable,
        "-m",
        "sleuth.cli",
        "ingest",
        str(corpus),
        "--index",
        str(ix),
        "--embedder",
        "hash:64",
        "--chunk-tokens",
        "64",
        "--batch-size",
        "4",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    manifest = ix / "sleuth-index.json"
    while time.time() < deadline:
        state = json.loads(manifest.read_text() or "{}") if manifest.exists() else {}
        if (
            state.get("state") == "ingesting"
            and Index(ix, IndexManifest.model_validate(state)).collection.count() > 20
        ):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with pytest.raises(IndexIncompleteError):
        Index.open(ix)
    done = subprocess.run(cmd + ["--json"], capture_output=True, text=True, check=True)
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    assert stats["resumed_chunks"] > 0
    index = Index.open(ix)
    assert index.collection.count() == len(index.lexical.rows) == stats["chunks"]


def test_removed_documents_leave_both_retrievers(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32)
    index.ingest(_docs(3))
    result = index.remove_documents(["doc1.t", "no-such-doc"])
    reopened = Index.open(tmp_path / "ix")
    assert set(reopened.documents) == {"doc0.t", "doc2.t"} and result.index_documents == 2
    assert not reopened.document_chunks("doc1.t")
    hits = Toolbox(reopened).search_corpus("w1x3 topic3").chunks
    assert hits and all(h.doc_id != "doc1.t" for h in hits)
