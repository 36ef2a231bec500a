"""The Chroma side of an index: clients (embedded, read-only, server), the index's collection
with a server-side BM25 index where the server has one, and server-side hybrid search."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from sleuth.errors import InputError
from sleuth.index.manifest import ID_KEY, IndexManifest

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.collection_configuration import CreateCollectionConfiguration
    from chromadb.api.types import Schema
    from chromadb.execution.expression.operator import Rank


def chroma_client(path: Path, chroma_url: str | None) -> ClientAPI:
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    args = _http_args(chroma_url) if chroma_url else {}
    try:
        if chroma_url:
            return chromadb.HttpClient(**args, settings=settings)
        # absolute: chromadb caches one client per path string, so a relative one would reach
        # the folder of an earlier working directory
        return chromadb.PersistentClient(path=str(path.absolute()), settings=settings)
    except Exception as e:  # noqa: BLE001 - chromadb raises many types for an unusable store
        where = chroma_url or str(path)
        raise InputError(f"cannot open Chroma data: {first_line(e)}", source=where) from None


def no_write_client(chroma_url: str | None) -> ClientAPI:
    """A client that writes nothing: in memory, or the server at ``chroma_url``.

    Raises:
        InputError: a malformed URL, or no Chroma server answers there.
    """
    import chromadb
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False, allow_reset=False)
    if not chroma_url:
        return chromadb.EphemeralClient(settings=settings)
    args = _http_args(chroma_url)
    try:
        return chromadb.HttpClient(**args, settings=settings)
    except Exception as e:  # noqa: BLE001 - chromadb wraps a refused connection in ValueError
        raise InputError(
            f"no Chroma server answers at {chroma_url} ({first_line(e)}); start one "
            "(`chroma run --port PORT`) or fix --chroma-url"
        ) from None


def _http_args(chroma_url: str) -> dict[str, Any]:
    """Host, port and TLS of a Chroma server URL (``http(s)://HOST[:PORT]``; port 8000 if none).

    Raises:
        InputError: not such a URL.
    """
    u = urlparse(chroma_url.strip())
    try:
        port = u.port or 8000
    except ValueError:
        port = 0
    if u.scheme not in ("http", "https") or not u.hostname or port <= 0:
        raise InputError(f"--chroma-url {chroma_url!r}: give http://HOST:PORT (or https://)")
    return {"host": u.hostname, "port": port, "ssl": u.scheme == "https"}


def first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def read_only_copy(chroma_dir: Path) -> Path:
    """Chroma's embedded client writes its SQLite file on open, so a read-only index is opened
    from a temporary copy of that file, the (large, read-only) segment folders linked in."""
    tmp = Path(tempfile.mkdtemp(prefix="sleuth-ro-"))
    for p in chroma_dir.iterdir():
        if p.is_dir():
            os.symlink(p.resolve(), tmp / p.name)
        else:
            shutil.copyfile(p, tmp / p.name)
    return tmp


SPARSE_KEY = "bm25_sparse"


def _sparse_schema() -> Schema:
    from chromadb import Schema
    from chromadb.api.types import SparseVectorIndexConfig
    from chromadb.execution.expression.operator import Key
    from chromadb.utils.embedding_functions import ChromaBm25EmbeddingFunction

    config = SparseVectorIndexConfig(
        source_key=Key.DOCUMENT,  # type: ignore[arg-type]  # chromadb's documented use; its hint says str
        embedding_function=ChromaBm25EmbeddingFunction(),
    )
    return Schema().create_index(config=config, key=SPARSE_KEY)


def native_hybrid_search(
    collection: Any,
    query: str,
    query_vec: np.ndarray,
    k_each: int,
    rrf_k: int,
    limit: int,
    exclude: frozenset[str],
) -> list[tuple[str, float]]:
    """Server-side ``Search(Rrf(Knn dense, Knn BM25))`` minus ``exclude``; for servers that have it."""
    from chromadb import Knn, Rrf, Search
    from chromadb.execution.expression.operator import Key

    ranks: list[Rank] = [
        Knn(query=query_vec.tolist(), return_rank=True, limit=k_each),
        Knn(query=query, key=SPARSE_KEY, return_rank=True, limit=k_each),
    ]
    search = Search().rank(Rrf(ranks=ranks, k=rrf_k)).limit(limit).select(Key.SCORE)
    if exclude:
        search = search.where(Key.ID.not_in(sorted(exclude)))
    res = collection.search(search)
    return [
        (cid, -float(score)) for cid, score in zip(res["ids"][0], res["scores"][0], strict=True)
    ]


def create_collection(path: Path, manifest: IndexManifest) -> bool:
    """Make the index's collection, stamped with its id; True when it has a server-side BM25
    index (distributed Chroma / Chroma Cloud). Single-node and embedded Chroma refuse sparse
    indexes, which we detect instead of assume, falling back to the local bm25s side."""
    client = chroma_client(path / "chroma", manifest.chroma_url)
    name, meta = manifest.collection, {ID_KEY: manifest.index_id}
    if name in {c.name for c in client.list_collections()}:
        raise InputError(
            f"Chroma collection {name!r} already exists (another index's?); choose another "
            "--collection",
            source=manifest.chroma_url or str(path),
        )
    config: CreateCollectionConfiguration = {"hnsw": {"space": "cosine"}}
    if manifest.chroma_url:
        try:
            client.create_collection(
                name,
                schema=_sparse_schema(),
                embedding_function=None,
                configuration=config,
                metadata=meta,
            )
            return True
        except Exception:  # noqa: BLE001 - any refusal means "not supported here"
            pass
    client.create_collection(name, embedding_function=None, configuration=config, metadata=meta)
    return False
