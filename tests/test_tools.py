"""The four tools over a real index: Chroma + bm25s + the shipped all-MiniLM-L6-v2."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.tools.rrf import rrf
from sleuth.tools.spec import TOOL_NAMES, TOOL_SCHEMAS
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.tools.types import ChunkHit


@pytest.fixture(scope="module")
def toolbox(minilm_index):
    return Toolbox(minilm_index)


def test_rrf_matches_hand_computed_fusion():
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]], k=60)
    expected = {
        "a": 1 / 61 + 1 / 62,
        "b": 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "d": 1 / 63,
    }
    assert [i for i, _ in fused] == ["a", "c", "b", "d"]
    for item, score in fused:
        assert score == pytest.approx(expected[item], abs=1e-15)


def test_search_ranks_equal_hand_computed_rrf_of_the_two_retrievers(toolbox, minilm_index):
    q = "Who directed the film Polish-Russian War?"
    lex = [i for i, _ in minilm_index.lexical_search(q, 25)]
    dense = [i for i, _ in minilm_index.dense_search(minilm_index.embedder.embed_query(q), 25)]
    scores: dict[str, float] = {}
    for ranking in (lex, dense):
        for rank, cid in enumerate(ranking, start=1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (60 + rank)
    result = toolbox.search_corpus(q)
    assert result.chunks
    for hit in result.chunks:
        assert hit.score == pytest.approx(scores[hit.id])
    got = [h.score for h in result.chunks]
    assert got == sorted(got, reverse=True)
    assert result.chunks[0].doc_id == "polish-russian-war-film"


def test_excluded_ids_never_return_and_search_digs_deeper(toolbox, minilm_index):
    q = "film director born in Warsaw"
    seen: set[str] = set()
    for _ in range(8):  # 8 rounds × 10 chunks exceeds the 50-candidate pool
        result = toolbox.search_corpus(q, exclude=seen)
        ids = [h.id for h in result.chunks]
        assert not set(ids) & seen
        assert len(ids) == 10, "unseen matches exist, so the search must keep returning full pages"
        seen |= set(ids)
    assert len(seen) == 80


def test_excluding_everything_returns_nothing(toolbox, minilm_index):
    everything = {r.id for r in minilm_index.lexical.rows}
    assert toolbox.search_corpus("film", exclude=everything).chunks == []


@settings(max_examples=25, deadline=None)
@given(max_tokens=st.integers(1, 600), max_chunks=st.integers(1, 10))
def test_packing_never_exceeds_limits(minilm_index, max_tokens, max_chunks):
    tb = Toolbox(minilm_index, ToolConfig(search_max_chunks=max_chunks))
    result = tb.search_corpus("American actress and singer", max_tokens=max_tokens)
    assert len(result.chunks) <= max_chunks
    assert sum(tb.block_tokens(h) for h in result.chunks) <= max_tokens


@pytest.mark.parametrize(
    "pattern", [r"\bborn\b", r"(?i)director", r"\d{4}", r"Warsaw|Kraków", r"^The "]
)
def test_grep_equals_python_re(toolbox, minilm_index, pattern):
    expected = [r.id for r in minilm_index.lexical.rows if re.search(pattern, r.text)][:5]
    got = [h.id for h in toolbox.grep_corpus(pattern).chunks]
    assert got == expected


def test_grep_respects_exclusions(toolbox, minilm_index):
    first = [h.id for h in toolbox.grep_corpus(r"\bfilm\b").chunks]
    again = [h.id for h in toolbox.grep_corpus(r"\bfilm\b", exclude=first).chunks]
    assert again and not set(first) & set(again)


def test_grep_errors_on_catastrophic_and_invalid_patterns(minilm_index):
    import time

    from sleuth.index.lexical import ChunkRow

    tb = Toolbox(minilm_index, ToolConfig(grep_timeout_s=0.2))
    evil = ChunkRow("evil_0", "evil", 0, "a" * 40 + "!", 12)
    lexical = minilm_index.lexical
    rows, lexical.rows = lexical.rows, [*lexical.rows, evil]  # the rows of a loaded side are mapped
    try:
        t0 = time.perf_counter()
        result = tb.grep_corpus(r"(a|aa)+$")  # exponential backtracking in the regex module
        elapsed = time.perf_counter() - t0
        t0 = time.perf_counter()
        nested = tb.grep_corpus(r"(a+)+$")  # the regex module needs no time limit for this one
        nested_elapsed = time.perf_counter() - t0
    finally:
        lexical.rows = rows
    assert result.error and "longer than" in result.error
    assert elapsed < 1.0
    assert nested_elapsed < 1.0 and (nested.error or nested.chunks == [])
    bad = tb.grep_corpus(r"(unclosed")
    assert bad.error and "invalid regular expression" in bad.error


def test_read_document_in_order_and_truncation_keeps_order(minilm_index):
    doc_id = max(minilm_index.documents, key=lambda d: len(minilm_index.document_chunks(d)))
    rows = minilm_index.document_chunks(doc_id)
    assert len(rows) >= 3
    full = Toolbox(minilm_index).read_document(doc_id)
    assert [h.id for h in full.chunks] == [r.id for r in rows] and full.note is None
    tb = Toolbox(minilm_index, ToolConfig(read_max_tokens=sum(r.tokens for r in rows) // 2))
    query = rows[-1].text[:80]
    cut = tb.read_document(doc_id, query=query)
    idxs = [int(h.id.rsplit("_", 1)[1]) for h in cut.chunks]
    assert idxs == sorted(idxs) and 0 < len(idxs) < len(rows)
    assert rows[-1].id in [h.id for h in cut.chunks], "the chunk most similar to the query is kept"
    assert "omitted chunks" in cut.note
    assert sum(tb.block_tokens(h) for h in cut.chunks) <= tb.config.read_max_tokens
    # a chunk id resolves to its document
    assert [h.id for h in Toolbox(minilm_index).read_document(rows[0].id).chunks] == [
        r.id for r in rows
    ]
    assert Toolbox(minilm_index).read_document("no-such-doc").error


def test_schemas_are_openai_functions():
    assert TOOL_NAMES[:4] == ["search_corpus", "grep_corpus", "read_document", "prune_chunks"]
    assert TOOL_NAMES[4:] == ["describe_corpus"]
    for s in TOOL_SCHEMAS:
        assert s["type"] == "function"
        params = s["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])


def test_chunk_hits_json_shape(toolbox):
    hit = toolbox.search_corpus("actress").chunks[0]
    assert set(hit.model_dump()) == {"id", "doc_id", "text", "tokens", "score"}
    assert isinstance(hit, ChunkHit)


def test_backend_and_native_hybrid_detection(minilm_index):
    """Embedded and single-node Chroma have no server-side BM25: detected, not assumed."""
    assert minilm_index.native_hybrid is False
    remote = minilm_index.manifest.chroma_url
    assert type(minilm_index.client).__name__ in (
        {"Client"} if not remote else {"Client", "HttpClient"}
    )
    assert minilm_index.collection.count() == len(minilm_index)
