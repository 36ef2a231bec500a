"""The LangChain and LlamaIndex retrievers, with the real ``langchain-core`` and
``llama-index-core``: each returns exactly sleuth's search chunks or the subagent's ranked
documents (justifications in the metadata), sync and async. A missing framework names its
extra: tests/test_extras.py."""

from __future__ import annotations

import asyncio

import pytest

import sleuth
from sleuth.errors import ConfigError, ToolError
from tests.conftest import wiki_documents

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.retrievers import BaseRetriever as LangChainRetriever  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from llama_index.core.retrievers import BaseRetriever as LlamaIndexRetriever  # noqa: E402

from sleuth.integrations import langchain, llamaindex  # noqa: E402

QUERY = "Who directed the film that came out first?"


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> sleuth.Index:
    """About 30 real Wikipedia paragraphs (hash embedder)."""
    index = sleuth.Index.create(tmp_path_factory.mktemp("frameworks") / "ix", embedder="hash")
    index.ingest(wiki_documents(3))
    return index


@pytest.fixture(scope="module")
def agent_run(index):
    return sleuth.Agent(index).search(QUERY)


def langchain_results(index, **kwargs):
    retriever = langchain.SleuthRetriever(index=index, **kwargs)
    assert isinstance(retriever, LangChainRetriever)
    docs = retriever.invoke(QUERY)
    again = asyncio.run(retriever.ainvoke(QUERY))
    assert [(d.id, d.page_content) for d in again] == [(d.id, d.page_content) for d in docs]
    return [(d.id, d.page_content, d.metadata) for d in docs]


def llamaindex_results(index, **kwargs):
    retriever = llamaindex.SleuthRetriever(index, **kwargs)
    assert isinstance(retriever, LlamaIndexRetriever)
    nodes = retriever.retrieve(QUERY)
    again = asyncio.run(retriever.aretrieve(QUERY))
    assert [(n.node.node_id, n.score) for n in again] == [(n.node.node_id, n.score) for n in nodes]
    for n in nodes:
        assert n.score == n.node.metadata.get("score")
    return [(n.node.node_id, n.node.get_content(), n.node.metadata) for n in nodes]


@pytest.mark.parametrize("results", [langchain_results, llamaindex_results])
def test_search_mode_returns_the_search_chunks(index, results):
    expected = index.search(QUERY).chunks
    got = results(index)
    assert [(i, text) for i, text, _ in got] == [(h.id, h.text) for h in expected]
    for rank, ((_, _, meta), hit) in enumerate(zip(got, expected, strict=True), start=1):
        assert meta["doc_id"] == hit.doc_id and meta["score"] == hit.score
        assert meta["rank"] == rank and meta["title"] == index.chunk(hit.id).title
    assert [i for i, _, _ in results(index, k=3)] == [h.id for h in expected[:3]]
    assert len(results(index, k=25)) == 25


@pytest.mark.parametrize("results", [langchain_results, llamaindex_results])
def test_agent_mode_returns_the_subagents_ranked_documents(index, agent_run, results):
    got = results(index, mode="agent")
    assert [i for i, _, _ in got] == [d.id for d in agent_run.documents] and got
    for (doc_id, text, meta), doc in zip(got, agent_run.documents, strict=True):
        assert meta["justification"] == doc.justification and meta["rank"] == doc.rank
        read = index.read(doc_id, query=QUERY).chunks
        assert text == "\n\n".join(c.text for c in read)
        assert meta["title"] == index.document_chunks(doc_id)[0].title
    assert len(results(index, mode="agent", k=2)) == 2


def test_the_langchain_retriever_composes_in_a_chain(index):
    retriever = langchain.SleuthRetriever(index=str(index.path), k=2)
    chain = retriever | RunnableLambda(lambda docs: [d.metadata["doc_id"] for d in docs])
    assert chain.invoke(QUERY) == [h.doc_id for h in index.search(QUERY, k=2).chunks]


@pytest.mark.parametrize("module", [langchain, llamaindex])
def test_bad_settings_and_failed_searches_raise(index, module):
    make = module.SleuthRetriever
    with pytest.raises(ConfigError, match="unknown mode"):
        make(index=index, mode="answer")
    with pytest.raises(ConfigError, match="k"):
        make(index=index, k=0)
    with pytest.raises(sleuth.InputError, match="unknown policy"):
        make(index=index, mode="agent", policy="nope")
    retriever = make(index=index)
    run = retriever.invoke if module is langchain else retriever.retrieve
    with pytest.raises(ToolError, match="non-empty"):
        run(" ")
