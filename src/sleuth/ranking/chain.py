"""Chain features: which seen document led to which, for 3–4-hop questions.

The agent's bridge searches start with a name taken from one of the best documents so far
(:meth:`HeuristicAgent._bridge_queries`), so the transcript alone says which document led to a
search: the document, found at an earlier hop, whose text holds the longest leading words of
the query (the bridge name). From that parent relation each seen document gets its place in a
chain: how deep the chain that first reached it is, how relevant its parents are, how much of the
question its chain covers together, and what the searches it led to found. And whether it holds
a bridge name at all: a 3–4-hop question's later documents are about the entity an earlier one
names, while most of what outranked them at selection was merely shown by the same bridge search
(its other words match anything). Measured in docs/RESULTS.md ("Bridge names").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from sleuth.ranking.text import fold, holds_name, stems


class SeenDoc(Protocol):
    """What this module reads of :class:`sleuth.ranking.features.SeenDoc` (which imports it)."""

    title: str
    text: str
    ranks: list[tuple[int, int]]


class Search(Protocol):
    """What this module reads of :class:`sleuth.ranking.features.Search`."""

    query: str
    hop: int


CHAIN_COLUMNS = (
    "chain_depth",
    "parent_rel",
    "chain_cover",
    "child_rel",
    "led_searches",
    "name_held",  # most relevant parent whose bridge name its text holds (0: none)
    "name_title",  # the same for its title
    "names_held",  # log(1 + how many bridge names its text holds)
)
_NAME_WORDS = 5  # a bridge query's name is at most this many leading words
COMMON_NAME = 0.1
"""A bridge name that more than this share of the seen documents besides its parent hold (at
least 1) is no name but a phrase every one holds (an e-mail's "Subject", "Date Thu"): it marks
nothing (the name columns)."""


def bridge_names(
    docs: Sequence[SeenDoc], searches: Sequence[Search]
) -> list[tuple[int | None, str]]:
    """Per search, the index in ``docs`` of the document that led to it (None for hop 0) and the
    name taken from it: the longest leading words of the query that document holds."""
    first = [min((searches[s].hop for s, _ in d.ranks), default=0) for d in docs]
    found_names: list[tuple[int | None, str]] = []
    for s in searches:
        words = s.query.split()[:_NAME_WORDS]
        holders = [j for j in range(len(docs)) if first[j] < s.hop] if s.hop else []
        found, name = None, ""
        for k in range(1, len(words) + 1):  # a longer prefix is held only by holders of a shorter
            prefix = " ".join(words[:k])
            holders = [j for j in holders if prefix in docs[j].text or prefix in docs[j].title]
            if not holders:
                break
            # the best-ranked holder when several share the name
            found = min(holders, key=lambda j: (first[j], -_best_rr(docs[j])))
            name = prefix
        found_names.append((found, name))
    return found_names


def search_parents(docs: Sequence[SeenDoc], searches: Sequence[Search]) -> list[int | None]:
    """Per search, the index in ``docs`` of the document that led to it (None for hop 0)."""
    return [parent for parent, _ in bridge_names(docs, searches)]


def _best_rr(doc: SeenDoc) -> float:
    return max((1.0 / r for _, r in doc.ranks), default=0.0)


def chain_features(
    question: str,
    docs: Sequence[SeenDoc],
    searches: Sequence[Search],
    relevance: Sequence[float],
) -> np.ndarray:
    """A ``[len(docs), len(CHAIN_COLUMNS)]`` matrix; ``relevance[i]``: how much of the question
    document i answers by itself (the selection features' link weight)."""
    named = bridge_names(docs, searches)
    parents = [parent for parent, _ in named]
    # The search that first showed each document (lowest hop, then earliest) and its parent.
    origin: list[int | None] = []
    for d in docs:
        shown = sorted((searches[s].hop, s) for s, _ in d.ranks)
        origin.append(parents[shown[0][1]] if shown else None)
    depth = [0] * len(docs)
    for i in sorted(range(len(docs)), key=lambda i: _first_hop(docs[i], searches)):
        o = origin[i]  # found at an earlier hop, so its depth is known
        depth[i] = 0 if o is None else min(depth[o] + 1, 3)
    shown_by: list[set[int]] = [set() for _ in searches]
    for j, e in enumerate(docs):
        for s, _ in e.ranks:
            shown_by[s].add(j)
    wanted = stems(question)
    covered = [wanted & stems(f"{d.title}\n{d.text}") for d in docs]
    held = _names_held(question, docs, named, relevance)
    rows = []
    for i, d in enumerate(docs):
        mine = {p for s, _ in d.ranks if (p := parents[s]) is not None and p != i}
        led = [s for s, p in enumerate(parents) if p == i]
        found_by_led = set().union(*(shown_by[s] for s in led)) - {i}
        chain, node = set(covered[i]), origin[i]
        while node is not None:  # origins are found at strictly earlier hops: no cycle
            chain |= covered[node]
            node = origin[node]
        rows.append(
            [
                depth[i] / 3.0,
                max((relevance[p] for p in mine), default=0.0),
                len(chain) / len(wanted) if wanted else 0.0,
                max((relevance[j] for j in found_by_led), default=0.0),
                math.log1p(len(led)),
                *held[i],
            ]
        )
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), len(CHAIN_COLUMNS))


def _names_held(
    question: str,
    docs: Sequence[SeenDoc],
    named: Sequence[tuple[int | None, str]],
    relevance: Sequence[float],
) -> list[tuple[float, float, float]]:
    """Per document: the most relevant parent whose bridge name (not a phrase of the question,
    not common: :data:`COMMON_NAME`) its text holds, the same for its title, and log(1 + how
    many such names its text holds)."""
    question_lower = fold(question)
    names = [
        (p, n)
        for p, name in named
        if p is not None and (n := fold(name)) and n not in question_lower
    ]
    texts = [fold(f"{d.title}\n{d.text}") for d in docs]
    # Each (text, name) pair is tested once: a name recurs (once per search its document led
    # to), and the commonness count and the columns below both read it.
    in_texts = {n: [holds_name(t, n) for t in texts] for _, n in names}
    most = max(1.0, COMMON_NAME * len(docs))
    names = [(p, n) for p, n in names if sum(in_texts[n]) - in_texts[n][p] <= most]
    titles = [fold(d.title) for d in docs]
    in_titles = {n: [holds_name(t, n) for t in titles] for _, n in names}
    rows = []
    for i in range(len(docs)):
        in_text = [relevance[p] for p, n in names if p != i and in_texts[n][i]]
        in_title = [relevance[p] for p, n in names if p != i and in_titles[n][i]]
        rows.append(
            (max(in_text, default=0.0), max(in_title, default=0.0), math.log1p(len(in_text)))
        )
    return rows


def _first_hop(doc: SeenDoc, searches: Sequence[Search]) -> int:
    return min((searches[s].hop for s, _ in doc.ranks), default=0)
