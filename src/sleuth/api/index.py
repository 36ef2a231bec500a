"""The index of the Python API: the store's :class:`~sleuth.index.store.Index` plus ingest from
paths or records and the three retrieval tools as methods.

It subclasses the store's class rather than wrapping it, so ``Index.open``/``Index.create`` are
the store's own (same checks, same errors) and an API index goes wherever a store index does
(a ``Toolbox``, the ranker, the selector).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sleuth.corpus.files import ReadOptions
from sleuth.corpus.models import Document
from sleuth.corpus.readers import document_from_record, read_documents
from sleuth.embed import Embedder
from sleuth.errors import InputError
from sleuth.index import attach as attaching
from sleuth.index.manifest import IndexManifest, IngestResult, SyncResult
from sleuth.index.store import Index as StoreIndex
from sleuth.index.store import Progress
from sleuth.tools.rerank import Reranker, make_reranker
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.tools.types import ToolResult

if TYPE_CHECKING:
    from sleuth.train.adapt import AdaptReport

Source = Document | Mapping[str, Any] | str | os.PathLike[str]
"""One thing to ingest: a :class:`Document`, a record ``{"id", "text", "title"?, "metadata"?}``
(the JSONL line as a dict), or a path (JSONL, folder, zip, mbox/.eml, HTML...)."""

_SOURCE = "ingest()"  # how errors name the records given in Python (the i-th is ``record i``)
_UNCAPPED = sys.maxsize  # a token budget that never binds: ``k`` alone limits the result


def load_documents(
    sources: Source | Iterable[Source], fmt: str = "auto", options: ReadOptions | None = None
) -> list[Document]:
    """Every source as documents, read and checked before anything is written.

    Args:
        sources: one source or several (see :data:`Source`); paths are read like
            ``sleuth ingest`` reads them.
        fmt: how paths are read: ``auto`` (by file type), ``sec`` or ``patents``.
        options: folder, link and zip limits for paths; what was skipped lands in
            ``options.skipped``.

    Raises:
        InputError: a bad record or file (named), a duplicate id among the paths, or nothing to
            ingest.
    """
    items = [sources] if isinstance(sources, str | os.PathLike | Document | Mapping) else sources
    docs: list[Document] = []
    paths: list[str | os.PathLike[str]] = []
    for i, item in enumerate(items):
        if isinstance(item, Document):
            docs.append(item)
        elif isinstance(item, Mapping):
            docs.append(document_from_record(dict(item), _SOURCE, str(i)))
        elif isinstance(item, str | os.PathLike):
            paths.append(item)
        else:
            raise InputError(
                f"expected a path, a dict or a Document, got {type(item).__name__}",
                source=_SOURCE,
                record=str(i),
            )
    if paths:
        docs.extend(read_documents([os.fspath(p) for p in paths], fmt, options))
    if not docs:
        raise InputError("no documents to ingest", source=_SOURCE)
    return docs


def tool_config(base: ToolConfig | None = None, **limits: int | None) -> ToolConfig:
    """``base`` (default :class:`ToolConfig`) with the limits that are given; a chunk count
    above the retrievers' depth deepens them, so ``k`` results can exist.

    Raises:
        ConfigError: a limit that is not positive.
    """
    config = replace(base or ToolConfig(), **{k: v for k, v in limits.items() if v is not None})
    k = max(config.search_max_chunks, config.grep_max_chunks)
    return replace(
        config,
        bm25_k=max(config.bm25_k, k),
        dense_k=max(config.dense_k, k),
        candidates=max(config.candidates, k),
    )


class Index(StoreIndex):
    """A searchable corpus: :meth:`create` (then :meth:`ingest`) or :meth:`open`, then
    :meth:`search`, :meth:`grep` and :meth:`read` (the policy's tools), or the whole subagent
    with :func:`sleuth.search`.

    Thread-safe for searches; one process writes an index at a time (others get ``BusyError``).
    """

    def __init__(self, path: Path, manifest: IndexManifest, embedder: Embedder | None = None):
        super().__init__(path, manifest, embedder)
        self._lock = threading.Lock()
        self._toolboxes: dict[tuple[str, ToolConfig], Toolbox] = {}
        self._rerankers: dict[str, Reranker | None] = {}

    @classmethod
    def attach(
        cls,
        path: str | os.PathLike[str],
        collection: str,
        *,
        chroma_path: str | os.PathLike[str] | None = None,
        chroma_url: str | None = None,
        embedder: str | None = None,
    ) -> Index:
        """Index an existing Chroma collection (``sleuth index attach``) and open it.

        The collection is only read: its vectors answer the dense side, and sleuth's folder at
        ``path`` holds the lexical and grep sides built from its documents (one document per
        record, chunk ``<id>_0``). Queries are embedded with the collection's own embedding
        function unless ``embedder`` names another of the same dimension.

        Args:
            path: a new (or empty) folder for sleuth's side.
            collection: the collection's name.
            chroma_path, chroma_url: where it is (one of them): a persistent Chroma folder or a
                Chroma server (``http://HOST:PORT``).
            embedder: an embedder spec (``minilm``, ``st:PATH``...) instead of the collection's.

        Raises:
            InputError: a missing collection, a folder that is not Chroma's, an embedder of
                another dimension; nothing is written then.
        """
        attaching.attach(
            path, collection, chroma_path=chroma_path, chroma_url=chroma_url, embedder=embedder
        )
        return cls.open(Path(path))

    def sync(self) -> SyncResult:
        """Pick up the records added, changed or deleted in an attached index's collection since
        the last sync (:func:`sync_attached`); this object then searches the new state."""
        result = sync_attached(self.path)
        fresh = type(self).open(self.path, self._embedder)
        with self._lock:
            self.manifest, self.client, self.collection = (
                fresh.manifest,
                fresh.client,
                fresh.collection,
            )
            self._lexical, self._fields = fresh._lexical, None
        return result

    def ingest(
        self,
        sources: Source | Iterable[Source],
        batch_size: int = 128,
        progress: Progress | None = None,
        *,
        fmt: str = "auto",
        read_options: ReadOptions | None = None,
        delete_missing: bool = False,
    ) -> IngestResult:
        """Read ``sources`` (:func:`load_documents`), then add the new documents and replace the
        changed ones (same id, other content); unchanged ones are not embedded again. Searches
        opened before see the old state until this returns; resumable if interrupted (call it
        again).

        Args:
            sources: documents, records, or paths, alone or in a list.
            batch_size: chunks embedded per batch.
            progress: called as ``progress(phase, done, total)`` while embedding.
            fmt, read_options: how paths are read (see :func:`load_documents`).
            delete_missing: also remove the indexed documents ``sources`` do not hold.

        Returns:
            an :class:`IngestResult`: documents ``added``, ``replaced``, ``unchanged``,
            ``deleted``, and the index's size after it.

        Raises:
            InputError: bad input, or ``delete_missing`` on an index with no documents; found
                before anything is written.
            BusyError: another process is writing this index.
        """
        docs = load_documents(sources, fmt, read_options)
        return super().ingest(
            docs, batch_size=batch_size, progress=progress, delete_missing=delete_missing
        )

    def adapt(
        self,
        tasks: int | None = None,
        *,
        seed: int | None = None,
        force: bool = False,
        learner: str | None = None,
        progress: Progress | None = None,
    ) -> AdaptReport:
        """``sleuth adapt``: fit the learned selector to this corpus and store it in the index,
        where every later search of it (``sleuth run``, ``Agent``, ``search``, the MCP server)
        finds it; ``PolicyOptions(ranker="shipped")`` still forces the shipped one.

        Args:
            tasks: tasks to generate over the corpus; half train, half are held out (None:
                ``AdaptConfig``'s, as for ``seed``).
            seed: fixes the generated tasks.
            force: store it even when held-out Recall@5 is below the shipped ranker's.
            learner: the selection head's learner (``linear`` or ``gbdt``); None:
                ``AdaptConfig``'s.
            progress: called as ``progress(phase, done, total)``.

        Returns:
            the report (:class:`~sleuth.train.adapt.AdaptReport`): tasks made, held-out R@2,
            R@5 and answer-found of single-pass, the shipped and the adapted ranker, and whether
            the adapted one was stored. Resumable: call it again after an interruption.

        Raises:
            InputError: too few tasks from this corpus, or bad settings.
            BusyError: another process is writing this index.
        """
        from sleuth.train.adapt import AdaptConfig, adapt_index

        given = {k: v for k, v in {"tasks": tasks, "seed": seed}.items() if v is not None}
        config = AdaptConfig(**given, force=force, learner=learner)
        return adapt_index(self, config, progress)

    def tools(self, reranker: str | None = None, config: ToolConfig | None = None) -> Toolbox:
        """The retrieval tools over this index (built once per reranker and config).

        Args:
            reranker: ``none``, ``cross-encoder:PATH`` or ``endpoint:MODEL@URL``.
            config: retrieval limits (default: the Context-1 report's).
        """
        spec = "" if reranker in (None, "none") else str(reranker)
        key = (spec, config or ToolConfig())
        with self._lock:
            if key not in self._toolboxes:
                if spec not in self._rerankers:  # a cross-encoder loads once, whatever the limits
                    self._rerankers[spec] = make_reranker(spec or None)
                self._toolboxes[key] = Toolbox(self, key[1], self._rerankers[spec])
            return self._toolboxes[key]

    def search(
        self,
        query: str,
        k: int | None = None,
        *,
        exclude: Collection[str] = (),
        max_tokens: int | None = None,
        reranker: str | None = None,
        where: dict[str, Any] | None = None,
    ) -> ToolResult:
        """``search_corpus``: BM25 + dense, fused by RRF, best chunk first.

        Args:
            query: what to look for.
            k: chunks to return at most; None: the tool's limits (10 chunks within 4,096
                tokens), as the policy sees them.
            exclude: chunk ids never to return (the search digs deeper instead).
            max_tokens: a token budget for the result (default: none when ``k`` is given).
            reranker: a reranker spec (see :meth:`tools`).
            where: a metadata filter in Chroma's grammar, applied on both retrieval sides
                (``describe_corpus`` lists the fields; a bad one is ``ToolResult.error``).

        Returns:
            a :class:`ToolResult`: ``chunks`` (id, doc_id, text, tokens, score), or ``error``.
        """
        config = _limits(k, max_tokens, "search_max_chunks", "search_max_tokens")
        return self.tools(reranker, config).search_corpus(query, exclude=exclude, where=where)

    def grep(
        self,
        pattern: str,
        k: int | None = None,
        *,
        exclude: Collection[str] = (),
        where: dict[str, Any] | None = None,
    ) -> ToolResult:
        """``grep_corpus``: chunks matching a regular expression, in corpus order.

        Args:
            pattern: a Python-style regular expression; a bad or runaway one is
                ``ToolResult.error``.
            k: chunks to return at most (default: the tool's 5).
            exclude: chunk ids to skip.
            where: a metadata filter, as for :meth:`search`.
        """
        config = _limits(k, None, "grep_max_chunks", "search_max_tokens")
        return self.tools(None, config).grep_corpus(pattern, exclude=exclude, where=where)

    def read(
        self, doc_id: str, query: str | None = None, *, max_tokens: int | None = None
    ) -> ToolResult:
        """``read_document``: a document's chunks in order.

        Args:
            doc_id: the document (or one of its chunk ids).
            query: over the budget, keep the chunks closest to it (else the first ones).
            max_tokens: the budget (default: the tool's 4,096 tokens).
        """
        config = None if max_tokens is None else tool_config(read_max_tokens=max_tokens)
        return self.tools(None, config).read_document(doc_id, query=query)


def sync_attached(path: str | os.PathLike[str]) -> SyncResult:
    """``sleuth index sync``: rebuild an attached index's lexical side from its collection's
    current records (a full rebuild), reporting what was added, changed and deleted.

    Raises:
        InputError: not an attached index, or the collection changed while it was read (nothing
            is written; rerun it).
        BusyError: another process is writing this index.
    """
    return attaching.sync(path)


def _limits(k: int | None, max_tokens: int | None, chunks: str, tokens: str) -> ToolConfig | None:
    """The tool config for ``k`` chunks within ``max_tokens`` (uncapped when only ``k`` is set)."""
    if k is None and max_tokens is None:
        return None
    budget = max_tokens if max_tokens is not None else _UNCAPPED
    return tool_config(None, **{chunks: k, tokens: budget})


def adapt(
    index: str | os.PathLike[str] | Index,
    tasks: int | None = None,
    *,
    seed: int | None = None,
    force: bool = False,
    learner: str | None = None,
    progress: Progress | None = None,
) -> AdaptReport:
    """:meth:`Index.adapt` on an index or an index folder."""
    opened = index if isinstance(index, Index) else Index.open(Path(index))
    return opened.adapt(tasks, seed=seed, force=force, learner=learner, progress=progress)
