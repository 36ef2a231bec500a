"""A document's title is searchable by both retrievers, while the policy reads the chunk text alone."""

from __future__ import annotations

import json

from sleuth.corpus.models import Document
from sleuth.index import Index
from sleuth.index.lexical import LEXICAL_FORMAT
from sleuth.tools.toolbox import Toolbox
from tests.lexical_jsonl import to_jsonl

DOCS = [
    Document(
        id="zanzibar",
        title="Zanzibar Quartet",
        text="They first played together in a rented hall and toured widely afterwards.",
    ),
    *(
        Document(id=f"filler{i}", title=f"Filler {i}", text=f"Plain text number {i} about weather.")
        for i in range(8)
    ),
]


def _index(tmp_path, embedder: str = "minilm") -> Index:
    Index.create(tmp_path / "ix", embedder=embedder).ingest(DOCS)
    return Index.open(tmp_path / "ix")


def test_bm25_and_dense_find_a_chunk_by_its_title_alone(tmp_path):
    index = _index(tmp_path)
    lexical = [cid for cid, _ in index.lexical_search("Zanzibar", 3)]
    assert lexical[:1] == ["zanzibar_0"]
    dense = [
        cid for cid, _ in index.dense_search(index.embedder.embed_query("Zanzibar Quartet"), 1)
    ]
    assert dense == ["zanzibar_0"]
    shown = Toolbox(index).search_corpus("Zanzibar Quartet").chunks
    assert shown[0].id == "zanzibar_0"
    assert "Zanzibar" not in shown[0].text  # the chunk text the policy reads is unchanged


def test_a_lexical_side_of_an_older_format_is_rebuilt_with_titles(tmp_path):
    _index(tmp_path, embedder="hash:64")
    stamp_file = tmp_path / "ix" / "lexical-1" / "stamp.json"
    old = json.loads(stamp_file.read_text())
    assert old["format"] == LEXICAL_FORMAT
    # Simulate a side saved by an early version: no title field, no format in the stamp.
    to_jsonl(
        stamp_file.parent,
        row=lambda r: {k: v for k, v in r.items() if k != "title"},
        stamp={k: v for k, v in old.items() if k != "format"},
    )
    reopened = Index.open(tmp_path / "ix")
    assert [cid for cid, _ in reopened.lexical_search("Zanzibar", 1)] == ["zanzibar_0"]
    assert json.loads(stamp_file.read_text())["format"] == LEXICAL_FORMAT
