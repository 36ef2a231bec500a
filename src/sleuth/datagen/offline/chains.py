"""The ``chain`` template: 3- and 4-hop tasks along a path of title mentions (MuSiQue's shape).

A path ``e0 → e1 → … → eh`` of links (a sentence of ``e_k``'s document names ``e_{k+1}``). Clue 1
is a masked sentence of ``e0``, which identifies it; clue ``k+2`` is the few words of ``e_k``'s
document around its mention of ``e_{k+1}``, found in no other document naming ``e_{k+1}``. The
answer is ``e_h``'s title and the gold documents are ``e0 … e_{h-1}`` in hop order: each names the
next, the last one holds the answer, and every name on the path is masked in the query, so a
solver has to walk the whole chain. ``e_h``'s own document is not gold (it is the answer's article,
not evidence for it) and, holding the answer, is never a distractor.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from sleuth.datagen.evidence import QuoteEvidence
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.corpus import Corpus
from sleuth.datagen.offline.templates import (
    TARGET,
    Draft,
    a_kind,
    ask,
    clue_sentence,
    link_clue,
)

PATHS_PER_START = 32
"""Paths tried from one start document before moving on (keeps the walk cheap on hubs)."""


def chain_paths(
    corpus: Corpus, hops: int, rng: random.Random
) -> Iterator[tuple[tuple[str, ...], tuple[int, ...]]]:
    """Paths of ``hops`` links over distinct documents with the sentence of each link, start
    documents in random order, up to :data:`PATHS_PER_START` from each."""
    out: dict[str, list[tuple[str, int]]] = {}
    for link in corpus.links:
        out.setdefault(link.source, []).append((link.target, link.sentence))
    starts = sorted(out)
    rng.shuffle(starts)
    for start in starts:
        found = 0
        stack: list[tuple[tuple[str, ...], tuple[int, ...]]] = [((start,), ())]
        while stack and found < PATHS_PER_START:
            path, sentences = stack.pop()
            if len(path) == hops + 1:
                found += 1
                yield path, sentences
                continue
            nexts = [n for n in out.get(path[-1], []) if n[0] not in path]
            rng.shuffle(nexts)
            stack += [((*path, t), (*sentences, s)) for t, s in nexts]


def chain_drafts(
    corpus: Corpus, rng: random.Random, config: OfflineConfig, hops: tuple[int, ...]
) -> Iterator[Draft | str]:
    """Chain drafts, alternating between the hop counts in ``hops``; one per answer."""
    streams = [chain_paths(corpus, h, random.Random(rng.random())) for h in hops]
    answered: set[str] = set()
    while streams:
        for stream in list(streams):
            item = next(stream, None)
            if item is None:
                streams.remove(stream)
                continue
            path, sentences = item
            if path[-1] in answered:
                continue
            draft = draft_chain(path, sentences, corpus, config)
            if isinstance(draft, Draft):
                answered.add(path[-1])
            yield draft


def draft_chain(
    path: tuple[str, ...], sentences: tuple[int, ...], corpus: Corpus, config: OfflineConfig
) -> Draft | str:
    """The chain task along ``path`` (``sentences[k]``: the sentence of ``path[k]`` naming
    ``path[k+1]``), or why there is none."""
    entities = [corpus.entities[d] for d in path]
    hops = len(path) - 1
    labels = [f"[Y{i + 1}]" for i in range(hops)] + [TARGET]
    masks = list(zip(entities, labels, strict=True))
    picked = clue_sentence(entities[0], masks, labels[0], corpus, config, forbid=TARGET)
    if picked is None:
        return "no_clue_sentence"
    quotes, clues = [picked[0]], [picked[1]]
    for k in range(hops):
        window = link_clue(
            entities[k], entities[k + 1], sentences[k], masks, labels[k + 1], corpus, config
        )
        if isinstance(window, str):
            return window
        quotes.append(window[0])
        clues.append(window[1])
    parts = [f'Clue 1 is about {labels[0]}, {a_kind(entities[0].kind)}: "{clues[0]}"']
    parts += [
        f"Clue {k + 2}: the article about {labels[k]} names {labels[k + 1]}, "
        f'{a_kind(entities[k + 1].kind)}, in "{clues[k + 1]}".'
        for k in range(hops)
    ]
    query = " ".join([*parts, ask(entities[-1].kind, TARGET)])
    evidence: dict[str, list[QuoteEvidence]] = {
        path[0]: [QuoteEvidence(quote=quotes[0], clue_indices=[0])]
    }
    for k in range(hops):
        evidence.setdefault(path[k], []).append(
            QuoteEvidence(quote=quotes[k + 1], clue_indices=[k + 1])
        )
    return Draft("chain", hops, tuple(clues), query, entities[-1], path[:-1], evidence)
