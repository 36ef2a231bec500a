"""An embeddings endpoint that answers with the wrong shape gets an error naming the endpoint
and the shape it should have sent, over a real server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI, Request

from sleuth.embed import EmbeddingShapeError, HashEmbedder, OpenAIEmbedder

DIM = 16
TEXTS = ["cats purr", "rust is safe", "green tea"]


def _vectors(mode: str, texts: list[str]) -> list[dict]:
    """One reply per mode; ``good`` is right, every other mode breaks the shape one way."""
    vecs = HashEmbedder(DIM).embed_documents(texts).tolist()
    rows = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
    if len(texts) == 1 or mode == "good":  # the dimension probe always succeeds
        return rows
    if mode == "one_short":
        return rows[:-1]
    if mode == "same_index":
        return [r | {"index": 0} for r in rows]
    if mode == "uneven":
        rows[1]["embedding"] = rows[1]["embedding"][:-3]
    elif mode == "other_dim":
        for r in rows:
            r["embedding"] = r["embedding"] + [0.5]
    elif mode == "nested":
        rows[0]["embedding"] = [rows[0]["embedding"]]
    elif mode == "words":
        rows[2]["embedding"] = ["a"] * DIM
    elif mode == "empty":
        for r in rows:
            r["embedding"] = []
    return rows


@pytest.fixture(scope="module")
def base_url():
    """``{base_url}/MODE/v1`` serves embeddings in that mode."""
    app = FastAPI()

    @app.post("/{mode}/v1/embeddings")
    async def embeddings(mode: str, request: Request) -> dict:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = _vectors(mode, texts)
        return {"object": "list", "data": data, "model": body["model"], "usage": {}}

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_a_well_shaped_reply_is_used(base_url):
    vecs = OpenAIEmbedder("e", f"{base_url}/good/v1").embed_documents(TEXTS)
    np.testing.assert_allclose(vecs, HashEmbedder(DIM).embed_documents(TEXTS), atol=1e-6)


@pytest.mark.parametrize(
    ("mode", "got"),
    [
        ("one_short", "returned 2 vector(s) with indices ['0', '1']"),
        ("same_index", "returned 3 vector(s) with indices ['0']"),
        ("uneven", "returned vectors of uneven lengths or not numbers"),
        ("words", "returned vectors of uneven lengths or not numbers"),
        ("nested", "returned vectors of uneven lengths or not numbers"),
        ("other_dim", f"returned an array of shape (3, {DIM + 1})"),
        ("empty", "returned an array of shape (3, 0)"),
    ],
)
def test_a_wrong_shape_names_the_endpoint_and_the_expected_shape(base_url, mode, got):
    url = f"{base_url}/{mode}/v1"
    embedder = OpenAIEmbedder("e", url)
    assert embedder.dim == DIM
    with pytest.raises(EmbeddingShapeError) as caught:
        embedder.embed_documents(TEXTS)
    message = str(caught.value)
    assert message.startswith(f"embeddings endpoint {url} (model 'e') {got}; ")
    assert message.endswith(f"expected 3 vector(s) of {DIM} numbers, one per input, indices 0..2")
