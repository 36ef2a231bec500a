"""Shared fixtures: small real corpora and indexes (real Chroma, real bm25s, real MiniLM)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from importlib import resources
from pathlib import Path

import pytest

from sleuth.corpus.models import Document

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


PACKAGED_2WIKI = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"


def wiki_documents(n_questions: int = 30) -> list[Document]:
    """Pooled Wikipedia paragraphs (one document per title) of the first 2Wiki questions
    shipped in the package; a small real corpus for tool tests."""
    from sleuth.tasks import read_2wiki

    docs, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    wanted = {d for t in tasks[:n_questions] for d in t.gold_doc_ids + t.distractor_doc_ids}
    return [d for d in docs if d.id in wanted]


@pytest.fixture(scope="session")
def wiki_docs() -> list[Document]:
    return wiki_documents()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real single-node Chroma server (`chroma run`) on 127.0.0.1."""
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="session", params=["embedded", "server"])
def minilm_index(request, tmp_path_factory, wiki_docs):
    """A real index over ~280 documents with the shipped all-MiniLM-L6-v2, once on embedded
    Chroma and once on a Chroma server, so every tool test runs against both."""
    from sleuth.index import Index

    url = request.getfixturevalue("chroma_server") if request.param == "server" else None
    path = tmp_path_factory.mktemp(f"minilm-{request.param}") / "index"
    index = Index.create(
        path, embedder="minilm", chunk_tokens=96, overlap_tokens=16, chroma_url=url
    )
    index.ingest(wiki_docs)
    return Index.open(path)


@pytest.fixture(scope="module")
def small_index(tmp_path_factory) -> Path:
    """A two-document index (hash embedder: no model load), for command-line runs in-process."""
    from sleuth.index import Index

    path = tmp_path_factory.mktemp("small") / "ix"
    docs = [
        Document(id="paris", text="Paris is the capital of France.", title="Paris"),
        Document(id="berlin", text="Berlin is the capital of Germany.", title="Berlin"),
    ]
    Index.create(path, embedder="hash").ingest(docs)
    return path
