"""The corpus graph after an update, reading again only the documents the update can change.

A document's nodes depend on its own text and on the corpus's titles (a title named inside a
longer run of names is a node of its own). So a document the update left alone keeps the nodes
the saved graph holds for it, unless it held a title no document carries now, or may name a
title that is new: the grep index's postings (or, where they do not narrow, the texts) find
those. Everything else is the same assembly as a full build, so the arrays are the same as
:meth:`CorpusGraph.build` would make from the new rows (tests/test_graph_update.py checks it).
At 100k one-chunk documents: 2.7 s against a full build's 14 (benchmarks/update_parts.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import numpy as np

from sleuth.errors import InputError
from sleuth.index.graph import RARE_DF, CorpusGraph, document_nodes, open_graph, rows_by_doc
from sleuth.index.graphnodes import NODES_VERSION, Titles, title_key
from sleuth.index.grepindex import GrepIndex
from sleuth.index.lexical import ChunkRow, LexicalIndex, Stamp


def next_graph(folder: Path, lexical: LexicalIndex, fresh: Collection[str]) -> CorpusGraph:
    """The graph of ``lexical`` (saved in ``folder``), from the graph saved there before an
    update that chunked ``fresh`` documents again (new or changed; removed ones are gone
    from the rows): a full build when that graph is missing, damaged or made another way."""
    try:
        old = CorpusGraph.load(folder)
    except InputError:  # damaged: open_graph says so and builds afresh
        old = None
    if old is None or old.stamp == lexical.stamp or not _reusable(old):
        return open_graph(folder, lexical)
    graph = updated_graph(old, lexical.rows, lexical.stamp, fresh, lexical.grep)
    with contextlib.suppress(OSError):
        graph.save(folder)
    return graph


def _reusable(graph: CorpusGraph) -> bool:
    return graph.nodes_version == NODES_VERSION and graph.rare_df == RARE_DF


def updated_graph(
    old: CorpusGraph,
    rows: Sequence[ChunkRow],
    stamp: Stamp,
    fresh: Collection[str],
    grep: GrepIndex,
) -> CorpusGraph:
    """The graph of ``rows`` (whose grep index is ``grep``), reusing ``old``'s nodes for the
    documents not in ``fresh`` where no title change can reach them."""
    by_doc = rows_by_doc(rows)
    titles = {d: title_key(chunks[0].title) for d, chunks in by_doc.items()}
    kept = old.document_keys()
    before = {old.nodes[int(n)] for n in np.unique(old.title_node) if n >= 0}
    now = {t for t in titles.values() if t}
    gone, new = before - now, now - before
    reread = set(fresh) | _docs_naming(new, rows, grep)
    title_set = Titles(now)
    keys: dict[str, set[str]] = {}
    for doc, chunks in by_doc.items():
        nodes = None if doc in reread else kept.get(doc)
        if (
            nodes is None
            or not gone.isdisjoint(nodes)
            or (titles[doc] and titles[doc] not in nodes)
        ):
            nodes = document_nodes(chunks, titles[doc], title_set)
        keys[doc] = nodes
    return CorpusGraph.from_nodes(titles, keys, stamp, old.rare_df)


def _docs_naming(titles: Iterable[str], rows: Sequence[ChunkRow], grep: GrepIndex) -> set[str]:
    """Documents whose text may hold every word of one of ``titles`` (a superset): the grep
    postings of an ASCII title, else each word looked for in the lower-cased texts."""
    docs: set[str] = set()
    lowered: list[str] | None = None
    for title in titles:
        found = grep.literal_rows(title) if title.isascii() else None
        if found is not None:
            docs.update(rows[i].doc_id for i in found.tolist())
            continue
        if lowered is None:
            lowered = [r.text.lower() for r in rows]
        words = title.split()
        docs.update(
            r.doc_id for r, low in zip(rows, lowered, strict=True) if all(w in low for w in words)
        )
    return docs
