"""Pluggable embedders and rerankers over real local components: an OpenAI-compatible
``/v1/embeddings`` + ``/v1/rerank`` server on 127.0.0.1, and a cross-encoder folder on disk."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI, Request

from sleuth.corpus.models import Document
from sleuth.embed import HashEmbedder, OpenAIEmbedder, make_embedder, minilm_path
from sleuth.index import Index
from sleuth.tools.rerank import CrossEncoderReranker, EndpointReranker, make_reranker
from sleuth.tools.toolbox import Toolbox

DOCS = [
    Document(id="cats", text="Cats are small domesticated felines that purr."),
    Document(id="rust", text="Rust is a systems programming language focused on safety."),
    Document(id="tea", text="Green tea is made from unoxidised Camellia sinensis leaves."),
]


def _server_app(requests: list[dict]) -> FastAPI:
    app = FastAPI()
    hashing = HashEmbedder(48)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict:
        body = await request.json()
        requests.append(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vecs = hashing.embed_documents(texts) * 3.0  # not unit length: the client must normalise
        data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)
        ]
        data.reverse()  # servers may answer out of order; the client must sort by index
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return {"object": "list", "data": data, "model": body["model"], "usage": usage}

    @app.post("/v1/rerank")
    async def rerank(request: Request) -> dict:
        body = await request.json()
        requests.append(body)
        # relevance = number of query words in the document, so the order is predictable
        words = set(body["query"].lower().split())
        scores = [len(words & set(d.lower().split())) for d in body["documents"]]
        return {
            "results": [{"index": i, "relevance_score": float(s)} for i, s in enumerate(scores)]
        }

    return app


@pytest.fixture(scope="module")
def server():
    requests: list[dict] = []
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(_server_app(requests), host="127.0.0.1", port=port, log_level="error")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/v1", requests
    srv.should_exit = True
    thread.join(timeout=10)


def test_openai_embedder_normalises_and_orders(server):
    url, requests = server
    emb = OpenAIEmbedder("test-embed", url)
    assert emb.dim == 48 and emb.spec == f"openai:test-embed@{url}"
    vecs = emb.embed_documents([d.text for d in DOCS], batch_size=2)
    expected = HashEmbedder(48).embed_documents([d.text for d in DOCS])
    np.testing.assert_allclose(vecs, expected, atol=1e-6)
    assert any(r.get("model") == "test-embed" and len(r["input"]) == 2 for r in requests)


def test_index_built_through_the_embedding_endpoint(server, tmp_path):
    url, _ = server
    make_embedder.cache_clear()
    index = Index.create(tmp_path / "ix", embedder=f"openai:test-embed@{url}")
    index.ingest(DOCS)
    hits = Toolbox(Index.open(tmp_path / "ix")).search_corpus("programming language safety")
    assert hits.chunks[0].doc_id == "rust"


def test_endpoint_reranker_reorders_search_results(server, tmp_path):
    url, requests = server
    index = Index.create(tmp_path / "ix", embedder="hash")
    index.ingest(DOCS)
    reranker = make_reranker(f"endpoint:test-rerank@{url}")
    assert isinstance(reranker, EndpointReranker)
    result = Toolbox(Index.open(tmp_path / "ix"), reranker=reranker).search_corpus(
        "green tea leaves"
    )
    assert result.chunks[0].doc_id == "tea" and result.chunks[0].score == 2.0  # "green", "tea"
    scores = [c.score for c in result.chunks]
    assert scores == sorted(scores, reverse=True)
    assert requests[-1]["model"] == "test-rerank" and requests[-1]["query"] == "green tea leaves"


def test_cross_encoder_from_local_folder(tmp_path):
    """A (randomly initialised) cross-encoder saved to disk, with MiniLM's tokenizer: the
    real loading and scoring path, with no download."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    folder = tmp_path / "ce"
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    reranker = make_reranker(f"cross-encoder:{folder}")
    assert isinstance(reranker, CrossEncoderReranker)
    scores = reranker.score("tea", [d.text for d in DOCS])
    assert len(scores) == 3 and len(set(scores)) == 3
    index = Index.create(tmp_path / "ix", embedder="hash")
    index.ingest(DOCS)
    result = Toolbox(Index.open(tmp_path / "ix"), reranker=reranker).search_corpus("tea cats rust")
    got = [c.score for c in result.chunks]
    assert got == sorted(got, reverse=True)
    by_doc = dict(
        zip(
            [d.id for d in DOCS],
            reranker.score("tea cats rust", [d.text for d in DOCS]),
            strict=True,
        )
    )
    assert {c.doc_id: c.score for c in result.chunks} == pytest.approx(
        {k: by_doc[k] for k in by_doc if k in {c.doc_id for c in result.chunks}}
    )


def test_unknown_specs_are_rejected():
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder("word2vec")
    with pytest.raises(ValueError, match="unknown reranker"):
        make_reranker("magic")
    assert make_reranker(None) is None and make_reranker("none") is None


def test_concurrent_first_use_builds_one_embedder(monkeypatch):
    """Parallel tool calls may ask for the embedder at once; it must be built exactly once
    (two concurrent transformers loads leave torch's default device on "meta")."""
    import sleuth.embed as embed

    builds = []

    class Slow(HashEmbedder):
        def __init__(self, dim: int = 384):
            builds.append(dim)
            time.sleep(0.2)
            super().__init__(dim)

    monkeypatch.setattr(embed, "HashEmbedder", Slow)
    make_embedder.cache_clear()
    got: list = []
    threads = [
        threading.Thread(target=lambda: got.append(make_embedder("hash:16"))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    make_embedder.cache_clear()
    assert len(builds) == 1 and all(g is got[0] for g in got)
