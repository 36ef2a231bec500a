"""Index safety: one collection per index, bad input changes nothing, a damaged index is
refused (never emptied), read-only indexes stay searchable, one writer at a time, and the
manifest as a pydantic model that still loads what schema 1 wrote."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sleuth.corpus.models import Document
from sleuth.errors import BusyError, IndexIncompleteError, InputError
from sleuth.index import Index
from sleuth.index.ingest_checks import clean_documents
from sleuth.index.manifest import MANIFEST, IndexManifest
from sleuth.index.update import read_stale
from sleuth.io import folder_lock
from tests.fakes import CrashingEmbedder

SRC = Path(__file__).resolve().parents[1] / "src"


def _docs(prefix: str, n: int, version: str = "one") -> list[Document]:
    return [
        Document(id=f"{prefix}{i}", text=f"{prefix}{i} item version {version}. " * 20)
        for i in range(n)
    ]


def _built(path: Path, docs: list[Document], **kw) -> Index:
    index = Index.create(path, embedder="hash:64", chunk_tokens=32, overlap_tokens=0, **kw)
    index.ingest(docs, batch_size=8)
    return index


def _state(path: Path) -> tuple:
    """What a failed command must leave unchanged: the manifest and every chunk in Chroma."""
    index = Index.open(path)
    got = index.collection.get(include=["documents"])
    return (path / MANIFEST).read_text(), sorted(zip(got["ids"], got["documents"], strict=True))


# -- one collection per index ------------------------------------------------------


def test_two_indexes_on_one_chroma_server_stay_apart(tmp_path, chroma_server):
    a = _built(tmp_path / "a", _docs("alpha", 3), chroma_url=chroma_server)
    b = _built(tmp_path / "b", _docs("beta", 4), chroma_url=chroma_server)
    assert a.manifest.collection != b.manifest.collection
    assert set(Index.open(tmp_path / "a").documents) == {d.id for d in _docs("alpha", 3)}
    assert set(Index.open(tmp_path / "b").documents) == {d.id for d in _docs("beta", 4)}
    with pytest.raises(InputError, match="already exists"):
        Index.create(
            tmp_path / "c",
            embedder="hash:64",
            chroma_url=chroma_server,
            collection=b.manifest.collection,
        )
    assert not (tmp_path / "c").exists()
    manifest = json.loads((tmp_path / "a" / MANIFEST).read_text())
    manifest["collection"] = b.manifest.collection
    (tmp_path / "a" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="belongs to another index"):
        Index.open(tmp_path / "a")


def test_collection_name_is_configurable_and_checked(tmp_path):
    index = _built(tmp_path / "ix", _docs("d", 2), collection="my.chunks")
    assert [c.name for c in index.client.list_collections()] == ["my.chunks"]
    with pytest.raises(InputError, match="collection name"):
        Index.create(tmp_path / "bad", embedder="hash:64", collection="-x")
    assert not (tmp_path / "bad").exists()


# -- validate before the first write, never delete what was not replaced ----------


@pytest.mark.parametrize(
    ("docs", "batch_size", "message"),
    [
        (_docs("d", 3, "two"), -1, "batch size"),
        (_docs("d", 3, "two"), 0, "batch size"),
        (_docs("d", 3, "two"), 10**6, "batch size"),
        ([Document(id="d0", text="new text", metadata={"": 1})], 8, "metadata key"),
        ([*_docs("d", 2, "two"), *_docs("d", 1, "three")], 8, "given twice"),
        # what Chroma or sleuth reserve, and values Chroma would store as null
        *[
            ([Document(id="d0", text="t", metadata={key: 1})], 8, re.escape(f"'{key}' is reserved"))
            for key in ("chroma:document", "#embedding", "$and", "doc_id", "title", "sha")
        ],
        ([Document(id="d0", text="t", metadata={"k": float("nan")})], 8, "cannot store"),
        ([Document(id="d0", text="t", metadata={"k": 2**64})], 8, "beyond 64 bits"),
        ([Document(id=" ", text="t")], 8, "empty document id"),
    ],
)
def test_bad_reingest_changes_nothing(tmp_path, docs, batch_size, message):
    index = _built(tmp_path / "ix", _docs("d", 3))
    before = _state(tmp_path / "ix")
    with pytest.raises(InputError, match=message):
        index.ingest(docs, batch_size=batch_size)
    assert _state(tmp_path / "ix") == before


def test_lone_surrogates_are_stored_as_replacement_characters(tmp_path):
    """A lone surrogate is replaced, as in model replies: never a UnicodeEncodeError mid-ingest."""
    bad = Document(
        id="s\ud800", text="half \udc00 a pair", title="t\ud83d", metadata={"k": "\ud800"}
    )
    fixed, changed = clean_documents([bad, *_docs("d", 1)])
    assert changed == ["s\ufffd"] and fixed[1] is not bad
    index = _built(tmp_path / "ix", [bad])
    [row] = index.document_chunks("s\ufffd")
    assert row.text == "half \ufffd a pair" and row.title == "t\ufffd"
    got = index.collection.get(ids=[row.id], include=["metadatas"])["metadatas"][0]
    assert got["k"] == "\ufffd"


def test_a_one_letter_corpus_is_searchable(tmp_path):
    """No word survives BM25's stop words and stemming: no lexical side, no crash."""
    index = _built(tmp_path / "ix", [Document(id="y", text="y")])
    assert index.lexical.retriever is None and index.lexical_search("y", 5) == []
    reopened = Index.open(tmp_path / "ix")
    assert reopened.dense_search(reopened.embedder.embed_query("y"), 5)[0][0] == "y_0"


def test_crashed_reingest_keeps_old_chunks_until_replaced(tmp_path):
    docs = _docs("d", 10)
    _built(tmp_path / "ix", docs)
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32, overlap_tokens=0)
    index._embedder = CrashingEmbedder(ok_batches=1)
    with pytest.raises(KeyboardInterrupt):
        index.ingest(_docs("d", 10, "two"), batch_size=4)
    for d in docs:  # delete-first would have emptied every document the crash did not reach
        assert index.collection.get(where={"doc_id": d.id}, include=[])["ids"], d.id
    again = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32, overlap_tokens=0)
    again.ingest(_docs("d", 10, "two"), batch_size=4)
    done = Index.open(tmp_path / "ix")
    assert all("version two" in r.text for r in done.lexical.rows)
    stale = read_stale(tmp_path / "ix")  # version one's rows, deleted by the next update
    assert done.collection.count() == len(done.lexical.rows) + len(stale) == 100


def test_damaged_index_is_refused_never_emptied(tmp_path):
    _built(tmp_path / "ix", _docs("d", 3))
    lexical = (tmp_path / "ix" / "lexical-1" / "text.bin").read_bytes()
    shutil.move(tmp_path / "ix" / "chroma", tmp_path / "chroma.bak")
    with pytest.raises(InputError, match="damaged"):
        Index.open(tmp_path / "ix")
    assert not (tmp_path / "ix" / "chroma").exists()
    assert (tmp_path / "ix" / "lexical-1" / "text.bin").read_bytes() == lexical
    shutil.move(tmp_path / "chroma.bak", tmp_path / "ix" / "chroma")
    index = Index.open(tmp_path / "ix")
    index.collection.delete(ids=[index.lexical.rows[0].id])
    with pytest.raises(InputError, match="Chroma holds"):
        Index.open(tmp_path / "ix")
    (tmp_path / "ix" / "chroma" / "chroma.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(InputError, match="Chroma"):
        Index.open(tmp_path / "ix")


def _read_only(root: Path, argv: list[str]) -> list[str]:
    """``argv`` run with ``root`` read-only: by file modes, or, as root (who ignores them), in a
    private mount namespace where ``root`` is bind-mounted read-only."""
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(root)], check=True)
        return argv
    if not shutil.which("unshare"):
        pytest.skip("running as root without unshare: cannot make a folder read-only")
    r = shlex.quote(str(root))
    script = f"mount --bind {r} {r} && mount -o remount,ro,bind {r} {r} && exec {shlex.join(argv)}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {r} {r}"], check=False)
    if probe.returncode != 0:
        pytest.skip("running as root where mount namespaces are not allowed")
    return ["unshare", "-m", "sh", "-c", script]


def test_read_only_index_is_searchable_and_refuses_ingest(tmp_path):
    _built(tmp_path / "ix", _docs("d", 30))
    corpus = tmp_path / "more.jsonl"
    corpus.write_text(json.dumps({"id": "new", "text": "fresh words"}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    before = sorted((p, p.stat().st_mtime_ns) for p in (tmp_path / "ix").rglob("*"))

    def cli(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "sleuth.cli", *args]
        return subprocess.run(
            _read_only(tmp_path, argv), capture_output=True, text=True, env=env, timeout=300
        )

    try:
        search = cli("tools", "search", "d7 item", "--index", str(tmp_path / "ix"), "--json")
        assert search.returncode == 0, search.stderr
        assert json.loads(search.stdout)[0]["doc_id"] == "d7"
        ingest = cli(
            "ingest",
            str(corpus),
            "--index",
            str(tmp_path / "ix"),
            "--embedder",
            "hash:64",
            "--chunk-tokens",
            "32",
            "--overlap-tokens",
            "0",
        )
        assert ingest.returncode == 2
        assert ingest.stderr.strip().startswith("error: ") and "cannot write" in ingest.stderr
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(tmp_path)], check=True)
    assert sorted((p, p.stat().st_mtime_ns) for p in (tmp_path / "ix").rglob("*")) == before


def test_dimension_mismatch_is_a_clear_error(tmp_path):
    _built(tmp_path / "ix", _docs("d", 2))
    path = tmp_path / "ix" / MANIFEST
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(manifest | {"embedder": "hash:32"}))
    with pytest.raises(InputError, match="64 dimensions"):
        Index.open(tmp_path / "ix").embedder  # noqa: B018
    del manifest["dim"]  # an older manifest: the stored vectors say the dimension
    path.write_text(json.dumps(manifest | {"embedder": "hash:32"}))
    with pytest.raises(InputError, match="64 dimensions"):
        Index.open(tmp_path / "ix").embedder  # noqa: B018


# -- the manifest model, and manifests written before it -------------------------

SCHEMA_1_KEYS = {
    "schema_version",
    "embedder",
    "chunk_tokens",
    "overlap_tokens",
    "chroma_url",
    "collection",
    "state",
    "generation",
    "documents",
    "chunks",
    "pending",
}


def test_manifest_written_by_schema_1_still_loads(tmp_path):
    index = _built(tmp_path / "ix", _docs("d", 3), collection="sleuth_chunks")
    path = tmp_path / "ix" / MANIFEST
    old = {k: v for k, v in json.loads(path.read_text()).items() if k in SCHEMA_1_KEYS}
    path.write_text(json.dumps(old, indent=2))  # exactly what the dict-based writer produced
    reopened = Index.open(tmp_path / "ix")
    assert reopened.manifest.index_id is None and reopened.manifest.collection == "sleuth_chunks"
    assert set(reopened.documents) == set(index.documents)
    assert reopened.lexical_search("d1 item", 1)[0][0].startswith("d1_")
    stats = Index.create(
        tmp_path / "ix", embedder="hash:64", chunk_tokens=32, overlap_tokens=0
    ).ingest(_docs("e", 1))
    assert stats.index_documents == 4 and stats.schema_version == 1
    assert IndexManifest.model_validate_json(path.read_text()).documents == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "not a JSON object"),
        ('{"schema_version": 1, "embedder": "hash"}', "Field required"),
    ],
)
def test_malformed_manifest_is_input_error(tmp_path, content, message):
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / MANIFEST).write_text(content)
    with pytest.raises(InputError, match=message):
        Index.open(tmp_path / "ix")


# -- one writer at a time ----------------------------------------------------------

HOLD_LOCK = """
import sys, time
from sleuth.io import folder_lock
with folder_lock(sys.argv[1], "test"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_second_writer_is_refused_while_the_first_runs(tmp_path):
    index = _built(tmp_path / "ix", _docs("d", 3))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "ix")],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BusyError, match=f"pid {holder.pid}"):
            index.ingest(_docs("e", 1))
        with pytest.raises(BusyError, match="another sleuth process"):
            index.repair()  # would roll back the ingest still running
        manifest = tmp_path / "ix" / MANIFEST
        manifest.write_text(manifest.read_text().replace('"ready"', '"ingesting"'))
        with pytest.raises(IndexIncompleteError, match=f"running now \\(pid {holder.pid}\\)"):
            Index.open(tmp_path / "ix")  # not "interrupted": --repair would undo a live ingest
    finally:
        holder.kill()  # a crashed writer: the OS drops its lock
        holder.wait()
    with pytest.raises(IndexIncompleteError, match="interrupted"):
        Index.open(tmp_path / "ix")  # no holder any more: a crashed ingest
    manifest.write_text(manifest.read_text().replace('"ingesting"', '"ready"'))
    assert (
        Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32, overlap_tokens=0)
        .ingest(_docs("e", 1))
        .index_documents
        == 4
    )


def test_in_process_lock_is_exclusive(tmp_path):
    with (
        folder_lock(tmp_path / "f", "a folder"),
        pytest.raises(BusyError, match="writing a folder"),
        folder_lock(tmp_path / "f", "a folder"),
    ):
        pass
    with folder_lock(tmp_path / "f", "a folder"):  # released when the block ends
        pass


def test_failed_first_ingest_does_not_block_the_corrected_one(tmp_path):
    index = Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32)
    index._embedder = CrashingEmbedder(ok_batches=0)
    with pytest.raises(KeyboardInterrupt):
        index.ingest(_docs("d", 3))
    with pytest.raises(IndexIncompleteError):
        Index.open(tmp_path / "ix")
    fixed = Index.create(tmp_path / "ix", embedder="hash:32", chunk_tokens=48)
    assert fixed.ingest(_docs("d", 3)).index_documents == 3
    reopened = Index.open(tmp_path / "ix")
    assert (reopened.manifest.embedder, reopened.manifest.dim) == ("hash:32", 32)
    assert reopened.embedder.dim == 32
