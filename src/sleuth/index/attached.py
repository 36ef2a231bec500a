"""The user's Chroma collection behind an attached index (:mod:`sleuth.index.attach`): opened
without writing to it, its embedding function, and :class:`AttachedCollection`, the collection as
the :class:`~sleuth.index.store.Index`'s read-only dense side.

A server is only read (``get``, ``query``, ``count``). Chroma's embedded client writes to the
folder it opens (its SQLite file and HNSW segments, even to read), so a folder is opened from a
private copy in a temporary folder, removed with the client that reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.corpus.models import doc_id_of
from sleuth.embed import Embedder, make_embedder
from sleuth.errors import InputError
from sleuth.index.chroma import first_line, no_write_client
from sleuth.index.manifest import AttachedSource, IndexManifest

COLLECTION_EF = "collection"
"""The embedder spec meaning "the embedding function the collection was created with"."""
SYNCED = "synced.json"


def chunk_of(record_id: str) -> str:
    return f"{record_id}_0"


def record_of(chunk_id: str) -> str:
    return doc_id_of(chunk_id)


# -- the user's collection, opened without writing ---------------------------------------
def check_chroma_folder(path: Path) -> None:
    if not (path / "chroma.sqlite3").is_file():
        raise InputError(
            "not a Chroma folder (no chroma.sqlite3); give the path a chromadb.PersistentClient "
            "was opened with",
            source=str(path),
        )


def _private_copy(path: Path) -> Path:
    """A copy of a Chroma folder to open: Chroma writes to the folder it opens. Links are
    followed (copied as what they point to), so no write can reach the user's files through one."""
    tmp = Path(tempfile.mkdtemp(prefix="sleuth-attach-"))
    try:
        shutil.copytree(path, tmp / "chroma", symlinks=False)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(
            f"cannot copy the Chroma folder to read it: {e}", source=str(path)
        ) from None
    return tmp


def _signature(path: Path) -> list[tuple[str, int, int]]:
    """Every file's (name, size, mtime): changes while a folder is copied and read show here."""
    out = []
    for p in sorted(path.rglob("*")):
        try:
            st = p.stat()
        except OSError:  # removed meanwhile: the list itself differs then
            continue
        if p.is_file():
            out.append((str(p.relative_to(path)), st.st_size, st.st_mtime_ns))
    return out


def _client(source: AttachedSource, copy: Path | None) -> Any:
    import chromadb
    from chromadb.config import Settings

    if source.chroma_url:
        return no_write_client(source.chroma_url)
    assert copy is not None
    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    try:
        return chromadb.PersistentClient(path=str(copy / "chroma"), settings=settings)
    except Exception as e:  # noqa: BLE001 - chromadb raises many types for an unusable store
        raise InputError(
            f"cannot open Chroma data: {first_line(e)}", source=where(source)
        ) from None


def where(source: AttachedSource) -> str:
    return source.chroma_url or source.chroma_path or "?"


def _collection(client: Any, source: AttachedSource) -> Any:
    """The named collection, opened without an embedding function (we build our own)."""
    try:
        return client.get_collection(source.collection, embedding_function=None)
    except Exception as e:  # noqa: BLE001 - NotFoundError, or an unreadable store
        try:
            names = sorted(c.name for c in client.list_collections())
        except Exception:  # noqa: BLE001
            names = []
        has = f"it has: {', '.join(names[:10])}" if names else "it has no collections"
        raise InputError(
            f"no Chroma collection {source.collection!r} ({first_line(e)}); {has}",
            source=where(source),
        ) from None


@contextmanager
def opened(source: AttachedSource) -> Iterator[tuple[Any, Callable[[], bool]]]:
    """``(collection, changed)`` for one read of the user's collection; ``changed()`` says
    whether a folder's files changed since the copy began. The copy is removed afterwards."""
    if not source.chroma_path:
        client = _client(source, None)
        try:
            yield _collection(client, source), lambda: False
        finally:
            _release(client, None)
        return
    path = Path(source.chroma_path)
    check_chroma_folder(path)
    before = _signature(path)
    copy = _private_copy(path)
    client = None
    try:
        client = _client(source, copy)
        yield _collection(client, source), lambda: _signature(path) != before
    finally:
        _release(client, copy)


def _release(client: Any, copy: Path | None) -> None:
    """Close a client (Chroma keeps one system per path open until then) and drop its copy."""
    if client is not None:
        client.close()
    if copy is not None:
        shutil.rmtree(copy, ignore_errors=True)


# -- embedding queries -----------------------------------------------------------------
class ChromaEmbedder:
    """A collection's persisted Chroma embedding function as a sleuth embedder (unit vectors)."""

    def __init__(self, function: Any, name: str):
        self.function = function
        self.spec = f"{COLLECTION_EF}:{name}"
        self.dim = len(self.embed_query("dimension probe"))

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Any = None
    ) -> np.ndarray:
        vecs = np.asarray(self.function(list(texts)), dtype=np.float32)
        if progress:
            progress(len(texts))
        unit: np.ndarray = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return unit

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.embed_documents([text])[0])


def collection_embedder(spec: str, collection: Any, source: AttachedSource) -> Embedder:
    """The embedder ``spec`` names; ``collection``: the one the collection was created with."""
    if spec != COLLECTION_EF:
        return make_embedder(spec)
    config = (collection.configuration_json or {}).get("embedding_function") or {}
    name = config.get("name")
    if name == "default":  # chromadb's default is all-MiniLM-L6-v2 (ONNX, downloaded on use)
        return make_embedder("minilm")
    if not name or config.get("type") == "legacy":
        raise InputError(
            f"collection {source.collection!r} has no persisted embedding function; name one "
            "with --embedder",
            source=where(source),
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        function = collection.configuration.get("embedding_function")
        return ChromaEmbedder(function, name)
    except Exception as e:  # noqa: BLE001 - any failure to build or run it
        raise InputError(
            f"cannot build collection {source.collection!r}'s embedding function {name!r} "
            f"({first_line(e)}); name one with --embedder",
            source=where(source),
        ) from None


def stored_dim(collection: Any) -> int | None:
    got = collection.get(limit=1, include=["embeddings"])["embeddings"]
    return None if got is None or len(got) == 0 else len(got[0])


def check_dim(embedder: Embedder, dim: int | None, source: AttachedSource) -> None:
    if dim is not None and embedder.dim != dim:
        raise InputError(
            f"collection {source.collection!r} holds {dim}-dimensional vectors but embedder "
            f"{embedder.spec!r} makes {embedder.dim}; name an embedder of {dim} dimensions",
            source=where(source),
        )


# -- the dense side of an open attached index -------------------------------------------
class AttachedCollection:
    """The user's collection as an :class:`~sleuth.index.store.Index`'s dense side: only the
    reads the store makes (``count``, ``query``, ``get`` by id), in sleuth's chunk ids, limited
    to the records the last sync saw. It has no method that writes."""

    def __init__(
        self, path: Path, collection: Any, manifest: IndexManifest, synced: frozenset[str]
    ):
        assert manifest.source is not None
        self.path = path
        self.collection = collection
        self.source = manifest.source
        self.synced = synced
        self.n = manifest.chunks
        self.embedder_spec = manifest.embedder

    def count(self) -> int:
        return self.n

    def embedder(self) -> Embedder:
        return collection_embedder(self.embedder_spec, self.collection, self.source)

    def query(
        self, query_embeddings: list[Any], n_results: int, include: list[str], where: Any = None
    ) -> dict[str, list[list[Any]]]:
        """Nearest synced records, as distances ``d`` with ``1 - d`` the similarity of unit
        vectors whatever the collection's space (``l2`` stores squared distances)."""
        live = self.collection.count()
        extra = max(0, live - self.n)  # records added since the sync come back and are dropped
        n = min(live, n_results + extra)
        if n <= 0:
            return {"ids": [[]], "distances": [[]]}
        res = self.collection.query(
            query_embeddings=query_embeddings, n_results=n, include=["distances"], where=where
        )
        scale = 0.5 if self.source.space == "l2" else 1.0
        pairs = [
            (chunk_of(rid), float(d) * scale)
            for rid, d in zip(res["ids"][0], res["distances"][0], strict=True)
            if rid in self.synced
        ][:n_results]
        return {"ids": [[i for i, _ in pairs]], "distances": [[d for _, d in pairs]]}

    def get(self, ids: list[str] | None = None, include: Any = None, **_: Any) -> dict[str, Any]:
        """Stored vectors of chunk ids (unit length; zeros for a record deleted since the sync).
        Anything else would read the collection's current state, not the synced one."""
        if ids is None:
            raise InputError(
                "the lexical side of this attached index is missing or stale; run "
                f"`sleuth index sync --index {self.path}`",
                source=str(self.path),
            )
        got = self.collection.get(ids=[record_of(c) for c in ids], include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"], strict=True))
        vecs = [
            np.asarray(by_id[record_of(c)], np.float32) if record_of(c) in by_id else None
            for c in ids
        ]
        dim = next((len(v) for v in vecs if v is not None), 1)
        out = [
            np.zeros(dim, np.float32) if v is None else v / max(float(np.linalg.norm(v)), 1e-12)
            for v in vecs
        ]
        return {"ids": list(ids), "embeddings": out}


def open_attached(path: Path, manifest: IndexManifest) -> tuple[Any, AttachedCollection]:
    """The client and dense side of an attached index (a folder's copy lives as long as they)."""
    source = manifest.source
    assert source is not None
    copy = None
    if source.chroma_path:
        check_chroma_folder(Path(source.chroma_path))
        copy = _private_copy(Path(source.chroma_path))
    client = None
    try:
        client = _client(source, copy)
        synced = frozenset(read_synced(path))
        dense = AttachedCollection(path, _collection(client, source), manifest, synced)
    except BaseException:
        _release(client, copy)
        raise
    weakref.finalize(dense, _release, client, copy)
    return client, dense


def read_only_error(path: Path, manifest: IndexManifest) -> InputError:
    return InputError(
        f"this index mirrors Chroma collection {manifest.collection!r}: change that collection, "
        "then run `sleuth index sync`",
        source=str(path),
    )


def read_synced(path: Path) -> dict[str, str]:
    try:
        data = json.loads((path / SYNCED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
