"""The lexical side's id look-ups (sorted hashes, :mod:`sleuth.index.idmap`) answer exactly as
the dicts they replace, built or saved and mapped, colliding hashes included; a side saved
before them gains them on first open."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.index import idmap
from sleuth.index.columns import HEADER, ChunkColumns, StrColumn, read_columns, write_columns
from sleuth.index.idmap import IdMap
from sleuth.index.lexical import ChunkRow, LexicalIndex

ANY_CHAR = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr))  # + lone surrogates
IDS = st.lists(st.text(ANY_CHAR, max_size=12), max_size=30)


def _same_as_dict(id_map: IdMap, ids: list[str], others: list[str]) -> None:
    plain = dict(zip(ids, range(len(ids)), strict=True))  # the last row of a repeated id
    for key in [*ids, *others]:
        assert id_map.get(key) == plain.get(key) and (key in id_map) == (key in plain)
    asked = [*others, *ids[::-1], *others]
    want = [plain[k] for k in asked if k in plain]
    assert id_map.rows(asked).tolist() == want
    assert dict(id_map.items()) == plain and list(id_map) == ids


@settings(max_examples=120, deadline=None)
@given(IDS, st.lists(st.text(ANY_CHAR, max_size=12), max_size=8))
def test_lookups_are_the_dicts_in_memory_and_over_a_column(ids, others):
    _same_as_dict(IdMap.build(ids), ids, others)
    blob, offsets = StrColumn.encode(ids)
    _same_as_dict(IdMap.build(StrColumn(blob, offsets, None)), ids, others)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(IDS, st.lists(st.text(ANY_CHAR, max_size=12), max_size=8))
def test_every_hash_colliding_still_answers_exactly(ids, others):
    """Equal hashes (forced: every id hashes to 0) fall back to comparing the ids themselves."""
    blob, offsets = StrColumn.encode(ids)
    column = StrColumn(blob, offsets, None)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(idmap, "id_hash", lambda data: 0)
        for keys in (ids, column):
            id_map = IdMap.build(keys)
            assert not id_map.hashes.any()
            _same_as_dict(id_map, ids, others)


@settings(max_examples=80, deadline=None)
@given(IDS, st.lists(st.text(ANY_CHAR, max_size=12), max_size=8), st.randoms())
def test_kept_answers_equal_fresh_lookups_and_stay_bounded(ids, others, rnd):
    """Asked again and again (the agent's pattern), the kept answers are a fresh map's, over a
    column and in memory, and never more than ``MEMO`` of them are kept."""
    plain = dict(zip(ids, range(len(ids)), strict=True))
    asked = [*ids, *others] * 3
    rnd.shuffle(asked)
    blob, offsets = StrColumn.encode(ids)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(idmap, "MEMO", 4)
        for keys in (ids, StrColumn(blob, offsets, None)):  # type: ignore[arg-type]
            id_map = IdMap.build(keys)
            for key in asked:
                fresh = IdMap.build(keys)
                assert id_map.get(key, -7) == fresh.get(key, -7) == plain.get(key, -7)
                assert (key in id_map) == (key in plain)
                assert len(id_map._memo) <= 4


def _rows(ids: list[str]) -> list[ChunkRow]:
    return [ChunkRow(c, f"doc{i % 4}-{c[:2]}", i, f"text {c}", 3) for i, c in enumerate(ids)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(ANY_CHAR, max_size=12), max_size=20, unique=True))
def test_saved_lookups_round_trip_and_match_the_built_sides(tmp_path_factory, ids):
    folder = tmp_path_factory.mktemp("cols")
    rows = _rows(ids)
    write_columns(folder, rows, {}, {})
    read = read_columns(folder)[0]
    assert isinstance(read, ChunkColumns) and read.maps_saved
    built = LexicalIndex(rows, {})
    loaded = LexicalIndex(read, {})
    assert isinstance(loaded.row_of, IdMap) and isinstance(loaded.doc_number, IdMap)
    assert dict(loaded.row_of.items()) == built.row_of
    assert dict(loaded.doc_number.items()) == built.doc_number
    assert {d: loaded.rows_of_doc[d] for d in loaded.rows_of_doc} == {
        d: built.rows_of_doc[d] for d in built.rows_of_doc
    }
    asked = [*ids[::2], "absent", *ids]
    assert loaded.rows_for(asked).tolist() == built.rows_for(asked).tolist()


MAP_FILES = ("id_hash.npy", "id_order.npy", "doc_hash.npy", "doc_order.npy")


def _as_saved_before_lookups(folder) -> None:
    header = json.loads((folder / HEADER).read_text())
    for name in MAP_FILES:
        (folder / name).unlink()
        del header["sizes"][name]
    (folder / HEADER).write_text(json.dumps(header))


def test_a_side_saved_before_the_lookups_opens_and_gains_them_once(tmp_path):
    rows = _rows([f"c{i}" for i in range(50)])
    built = LexicalIndex.build(rows, {"generation": 1})
    built.save(tmp_path / "lex")
    _as_saved_before_lookups(tmp_path / "lex")
    stale = LexicalIndex.load(tmp_path / "lex", upgrade=False)
    assert stale is not None and not stale.rows.maps_saved  # type: ignore[attr-defined]
    assert not (tmp_path / "lex" / "id_hash.npy").exists()  # upgrade=False writes nothing
    os.chmod(tmp_path / "lex", 0o555)  # read-only: the look-ups stay in memory
    try:
        kept = LexicalIndex.load(tmp_path / "lex")
        assert kept is not None and dict(kept.row_of.items()) == built.row_of
    finally:
        os.chmod(tmp_path / "lex", 0o755)
    for lex in (stale, LexicalIndex.load(tmp_path / "lex")):
        assert lex is not None and dict(lex.row_of.items()) == built.row_of
        assert dict(lex.doc_number.items()) == built.doc_number
        assert lex.search("text c7", 5) == built.search("text c7", 5)
    again = LexicalIndex.load(tmp_path / "lex")
    assert again is not None and again.rows.maps_saved  # type: ignore[attr-defined]
    assert set(MAP_FILES) <= set(json.loads((tmp_path / "lex" / HEADER).read_text())["sizes"])
    assert dict(again.row_of.items()) == built.row_of and again.stamp == built.stamp


@pytest.mark.parametrize(
    ("name", "damage", "says"),
    [
        ("id_hash.npy", lambda b: b[:-16] + b[-8:] + b[-16:-8], "not sorted"),
        ("doc_order.npy", lambda b: b[:-8] + b[-16:-8], "not one position"),
        ("id_hash.npy", lambda b: b[:-8] + bytes(8), "is not its id's|not sorted"),
    ],
)
def test_a_damaged_lookup_is_refused_in_one_line(tmp_path, name, damage, says):
    LexicalIndex.build(_rows([f"c{i}" for i in range(40)]), {}).save(tmp_path / "lex")
    path = tmp_path / "lex" / name
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(Exception, match=says) as raised:
        LexicalIndex.load(tmp_path / "lex")
    assert "\n" not in str(raised.value) and name in str(raised.value)
