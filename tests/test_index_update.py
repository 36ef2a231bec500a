"""Incremental ingest: an update adds, replaces and deletes documents exactly as a fresh ingest of
the new set would index them, embeds only what changed, and readers see one generation, never a
mix (during the update, after it, and after an interrupted one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.models import Document
from sleuth.embed import HashEmbedder
from sleuth.index import Index
from sleuth.index.lexical import LexicalIndex
from sleuth.index.update import next_lexical, plan_update
from sleuth.tools.toolbox import Toolbox

SETTINGS = {"embedder": "hash:64", "chunk_tokens": 32, "overlap_tokens": 0}
QUERIES = ["topic3 w2x5", "topic1 fresh", "w0x7 appended", "topic8"]


def _doc(i: int, extra: str = "") -> Document:
    text = " ".join(f"w{i}x{j} topic{j % 9}." for j in range(40)) + extra
    return Document(id=f"doc{i}", text=text, metadata={"n": i})


V1 = [_doc(i) for i in range(10)]
# doc0 gains a sentence at its end (its first chunks are unchanged), doc1 is rewritten,
# doc9 is gone, doc10 and doc11 are new.
V2 = [
    _doc(0, " appended words here."),
    Document(id="doc1", text="fresh text. " * 30, metadata={"n": 1}),
    *V1[2:9],
    _doc(10),
    _doc(11),
]


class Counting(HashEmbedder):
    """Counts the texts embedded; ``during`` runs before its third batch (mid-update: the first
    batch is in Chroma by then)."""

    def __init__(self, during=None, fail_after: int | None = None):
        super().__init__(64)
        self.embedded, self.calls, self.during, self.fail_after = 0, 0, during, fail_after

    def embed_documents(self, texts, batch_size=64, progress=None):
        self.calls += 1
        if self.calls == 3 and self.during is not None:
            self.during()
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.embedded += len(texts)
        return super().embed_documents(texts, batch_size, progress)


def _built(path: Path, docs: list[Document]) -> Index:
    index = Index.create(path, **SETTINGS)
    index.ingest(docs)
    return index


def _state(index: Index) -> dict:
    """Everything a reader sees: rows, both rankings in full, grep, reads, fields."""
    tools = Toolbox(index)
    ids = sorted({d.id for d in V1 + V2})
    k = 200  # every chunk: the whole ranking is compared, not only its head
    return {
        "rows": [(r.id, r.text) for r in index.lexical.rows],
        "bm25": [index.lexical_search(q, k) for q in QUERIES],
        "dense": [  # ties (many, with hash vectors) in Chroma's order: compared as sets
            sorted(
                (-round(s, 5), c) for c, s in index.dense_search(index.embedder.embed_query(q), k)
            )
            for q in QUERIES
        ],
        "grep": [c.id for c in tools.grep_corpus("topic3").chunks],
        "read": {d: [r.text for r in index.document_chunks(d)] for d in ids},
        "fields": {k: v for k, v in index.describe().items() if k != "generation"},
    }


def test_an_update_equals_a_fresh_ingest_and_embeds_only_what_changed(tmp_path):
    index = _built(tmp_path / "ix", V1)
    index._embedder = counting = Counting()
    result = index.ingest(V2, delete_missing=True)
    assert (result.added, result.replaced, result.unchanged, result.deleted) == (2, 2, 7, 1)
    fresh = _built(tmp_path / "fresh", V2)
    assert _state(Index.open(tmp_path / "ix")) == _state(Index.open(tmp_path / "fresh"))
    v1_doc0 = [r.text for r in _built(tmp_path / "v1", V1[:1]).lexical.rows]
    kept = sum(r.text in v1_doc0 for r in fresh.document_chunks("doc0"))
    assert kept > 0  # doc0's untouched chunks were kept, not embedded again
    new_chunks = sum(len(fresh.document_chunks(d)) for d in ("doc0", "doc1", "doc10", "doc11"))
    assert counting.embedded == new_chunks - kept
    again = index.ingest(V2, delete_missing=True)
    assert (again.unchanged, again.added, again.replaced, again.deleted) == (len(V2), 0, 0, 0)
    assert counting.embedded == new_chunks - kept  # nothing embedded by a repeat
    assert index.collection.count() == len(index.lexical.rows)  # the old rows are gone now


def test_readers_see_the_old_generation_or_the_new_never_a_mix(tmp_path):
    path = tmp_path / "ix"
    _built(path, V1)
    reader = Index.open(path)
    old = _state(reader)
    during: list[dict] = []
    writer = Index.create(path, **SETTINGS)

    def peek() -> None:
        assert reader.collection.count() > len(old["rows"])  # new rows are in Chroma already
        during.extend([_state(reader), _state(Index.open(path))])

    writer._embedder = Counting(peek)
    writer.ingest(V2, batch_size=2, delete_missing=True)
    assert during == [old, old]  # mid-update: the reader opened before, and one opened then
    assert _state(reader) == old  # after it: the reader opened before still sees the old state
    expected = _state(_built(tmp_path / "fresh", V2))
    assert _state(Index.open(path)) == expected


def test_an_interrupted_update_leaves_the_old_state_and_a_rerun_completes_it(tmp_path):
    path = tmp_path / "ix"
    _built(path, V1)
    old = _state(Index.open(path))
    writer = Index.create(path, **SETTINGS)
    writer._embedder = Counting(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        writer.ingest(V2, batch_size=2, delete_missing=True)
    assert _state(Index.open(path)) == old  # still published and searchable
    rerun = Index.create(path, **SETTINGS).ingest(V2, batch_size=2, delete_missing=True)
    assert rerun.resumed_chunks == 4  # the two batches written before the crash
    assert _state(Index.open(path)) == _state(_built(tmp_path / "fresh", V2))


def test_the_cli_reports_the_counts_and_refuses_delete_missing_on_a_new_index(tmp_path):
    def sleuth(docs: list[Document], *flags: str) -> subprocess.CompletedProcess:
        corpus = tmp_path / "docs.jsonl"
        corpus.write_text("".join(json.dumps(d.model_dump()) + "\n" for d in docs))
        argv = [str(corpus), "--index", str(tmp_path / "ix"), "--embedder", "hash:64", *flags]
        cmd = [sys.executable, "-m", "sleuth.cli", "ingest", *argv]
        return subprocess.run(cmd, capture_output=True, text=True)

    refused = sleuth(V1, "--delete-missing")
    assert refused.returncode == 2 and "no documents yet" in refused.stderr + refused.stdout
    assert not (tmp_path / "ix").exists()
    assert sleuth(V1).returncode == 0
    done = sleuth(V2, "--delete-missing", "--json")
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert [counts[k] for k in ("added", "replaced", "unchanged", "deleted")] == [2, 2, 7, 1]


def _chunker(doc: Document):
    chunks = chunk_document(doc, 16, 0)
    for c in chunks:
        c.metadata = {**c.metadata, "doc_id": c.doc_id, "idx": c.idx, "tokens": c.tokens}
    return chunks


_TEXTS = ["alpha beta. " * 12, "gamma delta. " * 25, "alpha beta. " * 12 + "tail.", "short."]
_VERSIONS = st.lists(
    st.dictionaries(st.sampled_from("abcde"), st.sampled_from(_TEXTS), max_size=5),
    min_size=1,
    max_size=4,
)


@settings(max_examples=40, deadline=None)
@given(versions=_VERSIONS, delete=st.lists(st.booleans(), min_size=4, max_size=4))
def test_planned_generations_hold_what_a_fresh_plan_holds(versions, delete):
    """Any sequence of updates leaves the rows a fresh ingest of the live documents makes; a row's
    Chroma key is unique, and never one the update dropped."""
    lexical, live_docs = LexicalIndex.build([], {}), {}
    for version, delete_missing in zip(versions, delete, strict=False):
        docs = [Document(id=i, text=t) for i, t in version.items()]
        plan = plan_update(lexical, docs, _chunker, delete_missing)
        before = {r.key or r.id for r in lexical.rows}
        lexical = next_lexical(lexical, plan, {})
        live_docs = ({} if delete_missing else live_docs) | {d.id: d for d in docs}
        keys = [r.key or r.id for r in lexical.rows]
        assert len(set(keys)) == len(keys)
        assert not set(plan.dropped) & set(keys)
        assert set(keys) <= before | {k for k, _ in plan.writes}
        assert set(plan.dropped) <= before
    fresh = next_lexical(
        LexicalIndex.build([], {}),
        plan_update(LexicalIndex.build([], {}), list(live_docs.values()), _chunker),
        {},
    )
    assert [(r.id, r.text, r.sha) for r in lexical.rows] == [
        (r.id, r.text, r.sha) for r in fresh.rows
    ]
