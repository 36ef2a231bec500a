"""Shared fixtures: small real corpora and indexes (real Chroma, real bm25s, real MiniLM)."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import pytest

from sleuth.corpus.models import Document

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def wiki_documents(n_questions: int = 30) -> list[Document]:
    """Pooled Wikipedia paragraphs (one document per title) of the first 2Wiki questions
    shipped in the package; a small real corpus for tool tests."""
    path = resources.files("sleuth").joinpath("data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl")
    docs: dict[str, Document] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:n_questions]:
        ctx = json.loads(line)["metadata"]["context"]
        for title, sents in zip(ctx["title"], ctx["content"], strict=True):
            doc_id = "w:" + title.replace(" ", "_")
            docs.setdefault(doc_id, Document(id=doc_id, text=" ".join(sents), title=title))
    return list(docs.values())


@pytest.fixture(scope="session")
def wiki_docs() -> list[Document]:
    return wiki_documents()


@pytest.fixture(scope="session")
def minilm_index(tmp_path_factory, wiki_docs):
    """A real index over ~280 documents with the shipped all-MiniLM-L6-v2."""
    from sleuth.index import Index

    path = tmp_path_factory.mktemp("minilm") / "index"
    index = Index.create(path, embedder="minilm", chunk_tokens=96, overlap_tokens=16)
    index.ingest(wiki_docs)
    return Index.open(path)
