"""The corpus graph on disk, schema 2: every part one file, opened memory-mapped.

Why: schema 1 kept the document ids and node keys as JSON lists and the matrices in a compressed
``.npz``, so opening a graph decoded every id and name into Python strings, hashed them into two
dicts and inflated the matrices into private memory (146 MiB at 100k chunks, most of it per
string). Here ids and keys are string columns (:class:`~sleuth.index.columns.StrColumn`: UTF-8
blob + offsets) with saved look-ups (:class:`~sleuth.index.idmap.IdMap`), and each matrix is its
``.npy`` arrays, so pages are read when PageRank or a look-up touches them and the kernel may
drop them again. ``graph.json`` is written last and names every file's size: a torn or
truncated file is refused in one line (:func:`~sleuth.index.columns.damaged`), and the index
rebuilds the graph from its rows, as it does a damaged lexical side.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from sleuth.index.columns import (
    StrColumn,
    check_sizes,
    damaged,
    load_array,
    load_id_map,
    load_str_column,
)
from sleuth.io import atomic_write_bytes, atomic_write_text

GRAPH_SCHEMA_VERSION = 2  # 1: JSON lists + compressed npz; 2: mapped columns and arrays
HEADER = "graph.json"
WHAT = "corpus graph"
_STRINGS = ("doc", "node")


def read_header(folder: Path) -> dict[str, Any] | None:
    """``graph.json``; None when there is none (a graph never saved)."""
    try:
        header = json.loads((folder / HEADER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise damaged(folder / HEADER, f"unreadable: {type(e).__name__}", WHAT) from e
    if not isinstance(header, dict):
        raise damaged(folder / HEADER, "not a JSON object", WHAT)
    return header


def write_graph(folder: Path, parts: dict[str, Any], header: dict[str, Any]) -> None:
    """``parts`` (see :func:`read_graph`) as files, each replaced atomically, then ``header``
    with their sizes; the schema-1 matrices (``graph.npz``) are removed after it."""
    folder.mkdir(parents=True, exist_ok=True)
    sizes: dict[str, int] = {}
    inc, adj = parts["incidence"], parts["adjacency"]
    wide = max(inc.nnz, adj.nnz, *inc.shape) >= 2**31
    index_dtype = np.int64 if wide else np.int32

    def put(name: str, data: bytes) -> None:
        atomic_write_bytes(folder / name, data)
        sizes[name] = len(data)

    def put_array(name: str, array: np.ndarray, dtype: type) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array, dtype))
        put(name, buffer.getvalue())

    for name in _STRINGS:
        blob, offsets = StrColumn.encode(list(parts[f"{name}_keys"]))
        put(f"{name}.bin", blob)
        put_array(f"{name}.npy", offsets, np.int64)
        put_array(f"{name}_hash.npy", parts[f"{name}_map"].hashes, np.int64)
        put_array(f"{name}_order.npy", parts[f"{name}_map"].order, np.int64)
    node_indptr, node_docs = parts["node_docs"]
    for name, indptr, indices in (
        ("inc", inc.indptr, inc.indices),
        ("adj", adj.indptr, adj.indices),
        ("node_docs", node_indptr, node_docs),
    ):
        put_array(f"{name}_indptr.npy", indptr, index_dtype)
        put_array(f"{name}_indices.npy", indices, index_dtype)
    put_array("inc_data.npy", inc.data, np.float32)
    put_array("adj_data.npy", adj.data, np.float32)
    put_array("title_node.npy", parts["title_node"], np.int32)
    n_docs, n_nodes = inc.shape
    header = {**header, "schema_version": GRAPH_SCHEMA_VERSION, "documents": n_docs}
    header |= {"nodes": n_nodes, "incidences": inc.nnz, "links": adj.nnz}
    header |= {"index_dtype": np.dtype(index_dtype).name, "sizes": sizes}
    atomic_write_text(folder / HEADER, json.dumps(header))
    (folder / "graph.npz").unlink(missing_ok=True)


def read_graph(folder: Path, header: dict[str, Any]) -> dict[str, Any]:
    """The parts a schema-2 ``header`` names, mapped: ``doc_keys``/``node_keys`` (columns),
    ``doc_map``/``node_map``, ``incidence``, ``adjacency``, ``node_docs`` (each node's documents:
    indptr, indices) and ``title_node``.

    Raises:
        InputError: a file missing, of another size than written, or inconsistent."""
    try:
        n, m = int(header["documents"]), int(header["nodes"])
        n_inc, n_adj = int(header["incidences"]), int(header["links"])
        sizes, index_dtype = dict(header["sizes"]), np.dtype(header["index_dtype"]).type
    except (KeyError, TypeError, ValueError) as e:
        raise damaged(folder / HEADER, f"incomplete: {type(e).__name__}", WHAT) from e
    check_sizes(folder, sizes, WHAT)
    parts: dict[str, Any] = {}
    for name, count in zip(_STRINGS, (n, m), strict=True):
        keys = load_str_column(folder, name, count, WHAT)
        parts[f"{name}_keys"], parts[f"{name}_map"] = keys, load_id_map(folder, name, keys, WHAT)

    def array(name: str, count: int, dtype: type = index_dtype) -> np.ndarray:
        return load_array(folder / f"{name}.npy", count, dtype, WHAT)

    def pointers(name: str, rows: int, nnz: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
        indptr, indices = array(f"{name}_indptr", rows + 1), array(f"{name}_indices", nnz)
        if rows and (indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0)):
            raise damaged(folder / f"{name}_indptr.npy", "pointers out of order", WHAT)
        if nnz and (indices.min() < 0 or indices.max() >= columns):
            raise damaged(folder / f"{name}_indices.npy", "an index out of range", WHAT)
        return indptr, indices

    inc_ptr, inc_idx = pointers("inc", n, n_inc, m)
    adj_ptr, adj_idx = pointers("adj", n, n_adj, n)
    inc_data, adj_data = array("inc_data", n_inc, np.float32), array("adj_data", n_adj, np.float32)
    parts["incidence"] = sp.csr_matrix((inc_data, inc_idx, inc_ptr), shape=(n, m), copy=False)
    parts["adjacency"] = sp.csr_matrix((adj_data, adj_idx, adj_ptr), shape=(n, n), copy=False)
    parts["node_docs"] = pointers("node_docs", m, n_inc, n)
    title_node = array("title_node", n, np.int32)
    if n and (title_node.min() < -1 or title_node.max() >= m):
        raise damaged(folder / "title_node.npy", "a title out of range", WHAT)
    parts["title_node"] = title_node
    return parts
