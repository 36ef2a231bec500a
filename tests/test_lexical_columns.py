"""The lexical side on disk as columns (LEXICAL_FORMAT 5): exact round trips, an index written as
JSON lines (format 4) opens and is rewritten once, and a damaged file is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.index.columns import HEADER, ChunkColumns, StrColumn, read_columns, write_columns
from sleuth.index.lexical import LEXICAL_FORMAT, ChunkRow, LexicalIndex
from sleuth.tools.toolbox import Toolbox
from tests.lexical_jsonl import to_jsonl

DOCS = [
    Document(
        id=f"d{i}",
        title=f"Title {i} é",
        text=" ".join(f"w{i}x{j} topic{j % 5} naïve 東京." for j in range(40)),
        metadata={"kind": "even" if i % 2 == 0 else "odd"},
    )
    for i in range(7)
]


def _rows(texts: list[str]) -> list[ChunkRow]:
    return [
        ChunkRow(
            f"c{i}", f"doc{i // 3}", i % 3, t, len(t), t[:5], f"{i:040x}", "k" if i == 1 else ""
        )
        for i, t in enumerate(texts)
    ]


ANY_CHAR = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))  # + lone surrogates


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(ANY_CHAR, max_size=40), max_size=12))
def test_offsets_and_texts_round_trip_exactly(texts):
    blob, offsets = StrColumn.encode(texts)
    assert offsets[0] == 0 and offsets[-1] == len(blob) and len(offsets) == len(texts) + 1
    column = StrColumn(blob, offsets, None)  # type: ignore[arg-type]
    assert list(column) == column.all() == texts


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(ANY_CHAR, max_size=30), max_size=10))
def test_rows_round_trip_through_the_files(tmp_path_factory, texts):
    folder = tmp_path_factory.mktemp("cols")
    rows = _rows(texts)
    write_columns(folder, rows, {"doc0": {"a": [1, "ü"]}}, {"doc0": "s"})
    read, meta, sha = read_columns(folder)
    assert isinstance(read, ChunkColumns) and list(read) == rows
    assert dict(meta) == {"doc0": {"a": [1, "ü"]}} and dict(sha) == {"doc0": "s"}


def test_lone_surrogates_round_trip():
    texts = ["\ud800", "a\udfffb", "😀"]
    blob, offsets = StrColumn.encode(texts)
    assert StrColumn(blob, offsets, None).all() == texts  # type: ignore[arg-type]


def _maps(lex: LexicalIndex) -> tuple:
    return (
        lex.row_of,
        lex.keyed,
        lex.doc_number,
        lex.doc_of_row.tolist(),
        {d: lex.rows_of_doc[d] for d in lex.rows_of_doc},
        dict(lex.doc_meta),
        dict(lex.doc_sha),
    )


def test_a_loaded_side_has_the_built_sides_rows_and_maps(tmp_path):
    rows = _rows([f"text {i} shared" for i in range(9)])
    rows[4].idx, rows[5].idx = 2, 0  # a document whose rows are not in chunk order
    for built in (
        LexicalIndex.build(rows, {"generation": 1}, {"doc0": {"x": 1}}, {"doc0": "h"}),
        LexicalIndex(rows[::-1], {"generation": 2}, doc_meta={"doc2": {}}),  # rows as given
    ):
        built.save(tmp_path / "lex")
        loaded = LexicalIndex.load(tmp_path / "lex")
        assert loaded is not None and isinstance(loaded.rows, ChunkColumns)
        assert list(loaded.rows) == list(built.rows) and _maps(loaded) == _maps(built)
        assert list(loaded.texts) == [r.text for r in built.rows]
        assert loaded.search("shared text", 5) == built.search("shared text", 5)
        assert loaded.rows[2:4] == built.rows[2:4] and loaded.stamp == built.stamp
        for lex in (built, loaded):  # a document's title is its first chunk's
            for doc in {r.doc_id for r in rows}:
                first = min((r for r in rows if r.doc_id == doc), key=lambda r: r.idx)
                assert lex.title_of(doc) == first.title
            assert lex.title_of("absent") == ""
    assert LexicalIndex(rows, {}).rows_of_doc["doc1"] == [3, 5, 4]  # by chunk, then row


def _index(tmp_path) -> Index:
    Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32).ingest(DOCS)
    return Index.open(tmp_path / "ix")


def _answers(index: Index) -> tuple:
    tools = Toolbox(index)
    return (
        [c.id for c in tools.search_corpus("topic3 naïve").chunks],
        [c.id for c in tools.search_corpus("w2x5", where={"kind": "even"}).chunks],
        [c.id for c in tools.grep_corpus("東京").chunks],
        [r.text for r in index.document_chunks("d3")],
    )


def test_an_index_written_as_json_lines_opens_and_is_rewritten_once(tmp_path):
    index = _index(tmp_path)
    before, answers, _ = list(index.lexical.rows), _answers(index), index.graph
    folder = tmp_path / "ix" / "lexical-1"
    to_jsonl(folder)
    graph = next((tmp_path / "ix").rglob("graph.json"))  # as saved beside a format-4 side
    meta = json.loads(graph.read_text())
    graph.write_text(json.dumps({**meta, "stamp": {**meta["stamp"], "format": 4}}))
    saved = graph.parent / "adj_data.npy"
    built = saved.stat().st_mtime_ns
    assert not (folder / HEADER).exists()
    reopened = Index.open(tmp_path / "ix")
    assert list(reopened.lexical.rows) == before and _answers(reopened) == answers
    assert (folder / HEADER).exists() and not (folder / "chunks.jsonl").exists()
    assert json.loads((folder / "stamp.json").read_text())["format"] == LEXICAL_FORMAT
    assert reopened.graph.stamp["format"] == 4 and saved.stat().st_mtime_ns == built  # kept
    again = Index.open(tmp_path / "ix")
    assert isinstance(again.lexical.rows, ChunkColumns)
    assert list(again.lexical.rows) == before and _answers(again) == answers


@pytest.mark.parametrize(
    ("name", "damage", "says"),
    [
        ("text.bin", lambda b: b[:-2], "truncated"),
        ("doc_of_row.npy", lambda b: b[:-8], "truncated"),
        (HEADER, lambda b: b[:10], "unreadable"),
        ("text.npy", lambda b: b[:-8] + np.int64(1).tobytes(), "offsets do not fit"),
        ("docmeta.json", lambda b: b"{" + b[1:], "unreadable"),
    ],
)
def test_a_damaged_file_is_one_line_and_loses_nothing(tmp_path, name, damage, says):
    _index(tmp_path)
    folder = tmp_path / "ix" / "lexical-1"
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    expected = list(LexicalIndex.load(folder).rows)  # type: ignore[union-attr]
    (folder / name).write_bytes(damage(files[name]))
    with pytest.raises(InputError, match=says) as raised:
        lex = LexicalIndex.load(folder)
        dict(lex.doc_meta)  # type: ignore[union-attr]  # read on first use
    message = str(raised.value)
    assert "\n" not in message and name in message and "damaged" in message
    damaged = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert damaged == {**files, name: damage(files[name])}  # refused, nothing written
    reopened = Index.open(tmp_path / "ix")  # the index rebuilds its derived side from Chroma
    assert sorted(r.id for r in reopened.lexical.rows) == sorted(r.id for r in expected)
    assert (folder / name).read_bytes() != damage(files[name]) or name == "docmeta.json"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.text(ANY_CHAR, max_size=30), min_size=1, max_size=12),
    st.lists(st.integers(0, 200), max_size=60),
)
def test_kept_rows_equal_fresh_decodes_and_stay_bounded(tmp_path_factory, texts, asked):
    """A row asked again is the kept object, equal to a fresh decode; at most ROWS_KEPT kept."""
    import sleuth.index.columns as columns

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns, "ROWS_KEPT", 3)
        _check_kept_rows(tmp_path_factory, texts, asked)


def _check_kept_rows(tmp_path_factory, texts, asked):
    folder = tmp_path_factory.mktemp("kept")
    rows = _rows(texts)
    write_columns(folder, rows, {}, {})
    read, _, _ = read_columns(folder)
    for i in (a % len(rows) for a in asked):
        first = read[i]
        assert first == rows[i] == read._decode(i)
        assert read[i] is first  # kept
        assert len(read._kept) <= 3
    assert list(read) == rows and read[:] == rows
