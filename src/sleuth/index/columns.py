"""The lexical side's chunk rows on disk as columns, memory-mapped when an index opens.

Why: reading ``chunks.jsonl`` (JSON and a :class:`ChunkRow` per line) and ``docmeta.jsonl``, then
three dicts built row by row, took 56 s to open a 1M-chunk index and held every text as a Python
``str`` (~1 KB a chunk). Here each string field is one UTF-8 blob plus int64 byte offsets and each
number one ``.npy`` array: opening maps the files, the ids' look-ups (:mod:`sleuth.index.idmap`)
included, and decodes nothing; a text is decoded when a tool asks for its row. ``columns.json``
records every file's size, so a truncated or damaged side is refused with one line naming the file.
"""

from __future__ import annotations

import io
import json
import mmap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

from sleuth.errors import InputError
from sleuth.index.idmap import ENCODING, ERRORS, IdMap, id_hash
from sleuth.io import atomic_write_bytes, atomic_write_text

HEADER = "columns.json"
STRINGS = ("id", "text", "title", "sha", "key")  # per row; ``doc`` is per document
NUMBERS = ("idx", "tokens", "doc_of_row")
MAPS = ("id", "doc")  # ``<name>_hash.npy`` and ``_order.npy``: absent in sides saved before them


@dataclass
class ChunkRow:
    """A chunk as the index holds it in memory: one per chunk of the corpus, read back from Chroma
    or the lexical folder when an index opens.

    Why not :class:`sleuth.corpus.models.Chunk` (the chunker's output, which ingest stores): the
    lexical side keeps *every* chunk, and a plain dataclass is 3-4x faster to build and
    3.5x smaller (112k rows on 2 cores: 0.8-1.2 s and 392 B/row vs 3.3-3.6 s and 1,353 B/row for
    the pydantic model with its metadata dict; ``python benchmarks/chunk_row_cost.py``); and it
    carries what the retrievers need and ``Chunk`` does not (the document ``title`` for
    :attr:`search_text`), while per-chunk metadata stays in Chroma.
    """

    id: str
    doc_id: str
    idx: int
    text: str
    tokens: int
    title: str = ""
    sha: str = ""
    """Hash of the stored text and metadata (what an update compares); empty in older rows."""
    key: str = ""
    """The Chroma row id when it is not :attr:`id` (a changed chunk written beside the old one
    until the update is published: :mod:`sleuth.index.update`)."""

    @property
    def search_text(self) -> str:
        """What the retrievers match: the document title, then the chunk text.

        A chunk rarely repeats its article's name ("He was born in ..."), so without the title
        a search for the entity misses every chunk but the first; the policy still reads
        ``text`` alone.
        """
        return f"{self.title}\n{self.text}" if self.title else self.text


def damaged(path: Path, why: str, what: str = "lexical side") -> InputError:
    return InputError(f"{what} damaged ({why}); delete the folder to rebuild it", source=str(path))


class StrColumn(Sequence[str]):
    """Strings as one UTF-8 blob and their ``n + 1`` byte offsets."""

    def __init__(self, blob: bytes | mmap.mmap, offsets: np.ndarray, path: Path):
        self.blob, self.offsets, self.path = blob, offsets, path

    @staticmethod
    def encode(strings: Iterator[str] | Sequence[str]) -> tuple[bytes, np.ndarray]:
        parts = [s.encode(ENCODING, ERRORS) for s in strings]
        offsets = np.zeros(len(parts) + 1, np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        return b"".join(parts), offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        a, b = self.offsets[i], self.offsets[i + 1]
        try:
            return self.blob[a:b].decode(ENCODING, ERRORS)
        except UnicodeDecodeError as e:
            raise damaged(self.path, f"not UTF-8 at byte {a}") from e

    def all(self) -> list[str]:
        """Every string, decoded in one pass (ASCII, the usual case for ids, slices one str)."""
        ends = self.offsets.tolist()
        blob = self.blob[: ends[-1]]  # bytes, also from a mapped file
        if blob.isascii():
            whole = blob.decode("ascii")
            return [whole[a:b] for a, b in zip(ends, ends[1:], strict=False)]
        return [self[j] for j in range(len(self))]


ROWS_KEPT = 4096
"""Decoded rows a :class:`ChunkColumns` keeps. The default agent asks for ~2,700 rows a question
(candidates, hits, the selector's titles and evidence), most of them repeats, at ~6 µs a decode:
~15 ms of CPU a question on MuSiQue. Bounded: at most a few MB of texts."""


class ChunkColumns(Sequence[ChunkRow]):
    """The rows of a saved lexical side: a :class:`ChunkRow` is made when first asked for, and
    the last :data:`ROWS_KEPT` asked for are kept (the same object again, as a list of rows
    would give)."""

    def __init__(
        self,
        strings: dict[str, StrColumn],
        docs: StrColumn,
        numbers: dict[str, np.ndarray],
        maps: dict[str, IdMap] | None = None,
    ):
        """``maps``: the saved id and document look-ups; made here (hashing every id) if None."""
        self.strings, self.docs, self.numbers = strings, docs, numbers
        self.text = strings["text"]
        self._kept: dict[int, ChunkRow] = {}
        self.maps_saved = maps is not None
        self.id_map = maps["id"] if maps else IdMap.build(strings["id"])
        self.doc_map = maps["doc"] if maps else IdMap.build(docs)

    def __len__(self) -> int:
        return len(self.numbers["idx"])

    @overload
    def __getitem__(self, i: int) -> ChunkRow: ...
    @overload
    def __getitem__(self, i: slice) -> list[ChunkRow]: ...
    def __getitem__(self, i: int | slice) -> ChunkRow | list[ChunkRow]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = self._kept.get(i)
        if row is None:
            row = self._decode(i)
            if len(self._kept) >= ROWS_KEPT:  # dict ops are atomic: parallel tool calls share it
                self._kept.clear()
            self._kept[i] = row
        return row

    def _decode(self, i: int) -> ChunkRow:
        s, n = self.strings, self.numbers
        return ChunkRow(
            s["id"][i], self.docs[int(n["doc_of_row"][i])], int(n["idx"][i]), s["text"][i],
            int(n["tokens"][i]), s["title"][i], s["sha"][i], s["key"][i],
        )  # fmt: skip

    def __iter__(self) -> Iterator[ChunkRow]:
        """Every row, decoded afresh (a whole pass would only churn the kept ones)."""
        return (self._decode(i) for i in range(len(self)))


@dataclass
class RowMaps:
    """What :class:`~sleuth.index.lexical.LexicalIndex` looks rows up by: a saved side's mapped
    look-ups (:class:`~sleuth.index.idmap.IdMap`), dicts for rows built in memory."""

    row_of: Mapping[str, int]  # chunk id -> row
    keyed: dict[str, int]  # Chroma key -> row, where the key is not the id
    doc_number: Mapping[str, int]  # document id -> number, in first-seen order
    doc_of_row: np.ndarray
    idx: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[ChunkRow]) -> RowMaps:
        if isinstance(rows, ChunkColumns):
            key = rows.strings["key"]
            has_key = np.flatnonzero(np.diff(key.offsets) > 0).tolist()
            return cls(
                rows.id_map, {key[i]: i for i in has_key}, rows.doc_map,
                rows.numbers["doc_of_row"], rows.numbers["idx"],
            )  # fmt: skip
        number: dict[str, int] = {}
        doc_of_row = np.fromiter(
            (number.setdefault(r.doc_id, len(number)) for r in rows), np.int64, count=len(rows)
        )
        return cls(
            {r.id: i for i, r in enumerate(rows)}, {r.key: i for i, r in enumerate(rows) if r.key},
            number, doc_of_row, np.fromiter((r.idx for r in rows), np.int64, count=len(rows)),
        )  # fmt: skip


class RowsOfDoc(Mapping[str, list[int]]):
    """Document id -> its rows in chunk order, sliced on demand from one sorted array (a dict
    of lists is ~1M lists to build at 1M documents), sorted on first use."""

    def __init__(self, doc_number: Mapping[str, int], doc_of_row: np.ndarray, idx: np.ndarray):
        self._number, self._doc_of_row, self._idx = doc_number, doc_of_row, idx
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    def _order_starts(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sorted is None:
            of_row, idx = self._doc_of_row, self._idx
            order = np.lexsort((idx, of_row)) if len(idx) else np.zeros(0, np.int64)
            counts = np.bincount(of_row, minlength=len(self._number)) if len(idx) else [0]
            self._sorted = order, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return self._sorted

    def __getitem__(self, doc: str) -> list[int]:
        n = self._number[doc]
        order, starts = self._order_starts()
        rows: list[int] = order[starts[n] : starts[n + 1]].tolist()
        return rows

    def __contains__(self, doc: object) -> bool:
        return doc in self._number

    def __iter__(self) -> Iterator[str]:
        return iter(self._number)

    def __len__(self) -> int:
        return len(self._number)


class LazyJson(Mapping[str, Any]):
    """A JSON object file read on first use: documents' metadata and hashes are needed by a
    ``where`` filter or an update, not to open an index (1M small dicts)."""

    def __init__(self, path: Path, parse: Callable[[Any], dict[str, Any]] = dict):
        self.path, self._parse = path, parse
        self._data: dict[str, Any] | None = None

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            try:
                self._data = self._parse(json.loads(self.path.read_bytes()))
            except (OSError, ValueError, TypeError) as e:
                raise damaged(self.path, f"unreadable: {type(e).__name__}") from e
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def write_columns(
    folder: Path, rows: Sequence[ChunkRow], doc_meta: Mapping[str, Any], doc_sha: Mapping[str, str]
) -> None:
    """``rows`` and the documents' metadata and hashes into ``folder`` (a fresh one: the caller
    swaps it in whole); ``columns.json``, with every file's size, last."""
    maps = RowMaps.of(rows)
    sizes: dict[str, int] = {}

    def put(name: str, data: bytes) -> None:
        (folder / name).write_bytes(data)
        sizes[name] = len(data)

    def put_array(name: str, array: np.ndarray) -> None:
        np.save(folder / name, np.ascontiguousarray(array, np.int64))
        sizes[name] = (folder / name).stat().st_size

    columns: dict[str, list[str]] = {}
    for field in STRINGS:
        columns[field] = [getattr(r, field) for r in rows]
        blob, offsets = StrColumn.encode(columns[field])
        put(f"{field}.bin", blob)
        put_array(f"{field}.npy", offsets)
    docs = list(maps.doc_number)
    blob, offsets = StrColumn.encode(docs)
    put("doc.bin", blob)
    put_array("doc.npy", offsets)
    for name, made, keys in (("id", maps.row_of, columns["id"]), ("doc", maps.doc_number, docs)):
        id_map = made if isinstance(made, IdMap) else IdMap.build(keys)
        put_array(f"{name}_hash.npy", id_map.hashes)
        put_array(f"{name}_order.npy", id_map.order)
    put_array("idx.npy", maps.idx)
    put_array("tokens.npy", np.fromiter((r.tokens for r in rows), np.int64, count=len(rows)))
    put_array("doc_of_row.npy", maps.doc_of_row)
    put("docmeta.json", json.dumps(list(doc_meta.items())).encode())
    put("docsha.json", json.dumps(dict(doc_sha)).encode())
    header = {"rows": len(rows), "documents": len(docs), "sizes": sizes}
    (folder / HEADER).write_text(json.dumps(header), encoding="utf-8")


def add_maps(folder: Path, rows: ChunkColumns) -> None:
    """Save the look-ups of a side written before they were (made on open: ~1 s at 1M ids),
    each file replaced atomically, ``columns.json`` naming them last."""
    header = json.loads((folder / HEADER).read_text(encoding="utf-8"))
    for name, id_map in (("id", rows.id_map), ("doc", rows.doc_map)):
        for part, array in (("hash", id_map.hashes), ("order", id_map.order)):
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(array, np.int64))
            atomic_write_bytes(folder / f"{name}_{part}.npy", buffer.getvalue())
            header["sizes"][f"{name}_{part}.npy"] = buffer.getbuffer().nbytes
    atomic_write_text(folder / HEADER, json.dumps(header))


def read_columns(folder: Path) -> tuple[ChunkColumns, LazyJson, LazyJson]:
    """The rows, documents' metadata and hashes saved by :func:`write_columns`, mapped.

    Raises:
        InputError: a file missing, of another size than written, or inconsistent."""
    try:
        header = json.loads((folder / HEADER).read_text(encoding="utf-8"))
        n, n_docs, sizes = int(header["rows"]), int(header["documents"]), dict(header["sizes"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise damaged(folder / HEADER, f"unreadable: {type(e).__name__}") from e
    expected = {f"{f}.{e}" for f in (*STRINGS, "doc") for e in ("bin", "npy")}
    expected |= {f"{f}.npy" for f in NUMBERS} | {"docmeta.json", "docsha.json"}
    if missing := sorted(expected - set(sizes)):
        raise damaged(folder / HEADER, f"lists no {missing[0]}")
    check_sizes(folder, sizes)
    strings = {f: load_str_column(folder, f, n) for f in STRINGS}
    docs = load_str_column(folder, "doc", n_docs)
    numbers = {f: load_array(folder / f"{f}.npy", n) for f in NUMBERS}
    of_row = numbers["doc_of_row"]
    if n and (of_row.min() < 0 or of_row.max() >= n_docs):
        raise damaged(folder / "doc_of_row.npy", "a row's document out of range")
    maps = None
    if all(f"{name}_hash.npy" in sizes for name in MAPS):
        maps = {
            "id": load_id_map(folder, "id", strings["id"]),
            "doc": load_id_map(folder, "doc", docs),
        }
    meta = LazyJson(folder / "docmeta.json", lambda pairs: dict(map(tuple, pairs)))
    return ChunkColumns(strings, docs, numbers, maps), meta, LazyJson(folder / "docsha.json")


def check_sizes(folder: Path, sizes: Mapping[str, int], what: str = "lexical side") -> None:
    """Every file named in a header has the size it was written with (a torn copy has not)."""
    for name, size in sizes.items():
        try:
            got = (folder / name).stat().st_size
        except OSError:
            raise damaged(folder / name, "missing", what) from None
        if got != size:
            raise damaged(folder / name, f"{got:,} bytes, written {size:,}: truncated?", what)


def load_id_map(folder: Path, name: str, keys: StrColumn, what: str = "lexical side") -> IdMap:
    """A saved look-up, checked as far as a wrong answer could come of it: hashes sorted, rows
    in range (a hit is compared with the id itself)."""
    n = len(keys)
    hashes = load_array(folder / f"{name}_hash.npy", n, what=what)
    order = load_array(folder / f"{name}_order.npy", n, what=what)
    if n and np.any(hashes[1:] < hashes[:-1]):
        raise damaged(folder / f"{name}_hash.npy", "hashes not sorted", what)
    if n and (order.min() < 0 or order.max() >= n or np.bincount(order, minlength=n).max() > 1):
        raise damaged(folder / f"{name}_order.npy", "not one position a row", what)
    for p in {0, n // 2, n - 1} if n else ():  # a few ids hashed again: the same hash function
        if id_hash(keys.blob[keys.offsets[order[p]] : keys.offsets[order[p] + 1]]) != hashes[p]:
            raise damaged(folder / f"{name}_hash.npy", f"hash {p} is not its id's", what)
    return IdMap(keys, hashes, order)


def load_array(
    path: Path, n: int, dtype: type = np.int64, what: str = "lexical side"
) -> np.ndarray:
    """A saved ``.npy`` of ``n`` values of ``dtype``, memory-mapped (InputError otherwise)."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise damaged(path, f"unreadable: {type(e).__name__}", what) from e
    if array.dtype != dtype or array.shape != (n,):
        expected = np.dtype(dtype).name
        raise damaged(path, f"{array.dtype} {array.shape}, expected {expected} ({n},)", what)
    return np.asarray(array)


def load_str_column(folder: Path, name: str, n: int, what: str = "lexical side") -> StrColumn:
    """``name.bin`` (the strings' UTF-8) and ``name.npy`` (their offsets), mapped and checked."""
    offsets = load_array(folder / f"{name}.npy", n + 1, what=what)
    path = folder / f"{name}.bin"
    size = path.stat().st_size
    if offsets[0] != 0 or offsets[-1] != size or np.any(np.diff(offsets) < 0):
        raise damaged(folder / f"{name}.npy", f"offsets do not fit {name}.bin", what)
    blob: bytes | mmap.mmap = b""
    if size:
        with open(path, "rb") as f:
            blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return StrColumn(blob, offsets, path)
