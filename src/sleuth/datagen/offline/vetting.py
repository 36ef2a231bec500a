"""From a draft to a task: the verifier's check, distractor mining, the gold documents' BM25 ranks
(the leakage flag) and the SPEC §8 record."""

from __future__ import annotations

import hashlib

from sleuth.datagen.evidence import answer_pattern, verify_extraction
from sleuth.datagen.offline.config import DOMAIN, OFFLINE_GENERATOR, OfflineConfig
from sleuth.datagen.offline.corpus import Corpus
from sleuth.datagen.offline.masking import PLACEHOLDER
from sleuth.datagen.offline.templates import Draft, aliases_of
from sleuth.tasks import Task

LEAK_DEPTH = 10


def verify_draft(draft: Draft, corpus: Corpus) -> list[str]:
    """The verifier's failure reasons for a draft (empty when it passes)."""
    result = verify_extraction(
        {doc_id: corpus.texts[doc_id] for doc_id in draft.gold},
        draft.clues,
        draft.answer.title,
        aliases_of(draft.answer),
        draft.evidence,
        question=draft.query,
    )
    return result.reasons


def offline_distractors(
    draft: Draft, corpus: Corpus, config: OfflineConfig
) -> tuple[list[str], int]:
    """BM25 neighbours of the clues free of the answer and its aliases, and how many were
    rejected for containing it."""
    pattern = answer_pattern(draft.answer.title, aliases_of(draft.answer))
    hits = corpus.lexical.search(_search_text(" ".join(draft.clues)), config.distractor_depth)
    kept: list[str] = []
    rejected = 0
    for doc_id in hits:
        if doc_id in draft.gold:
            continue
        if pattern is None or pattern.search(corpus.normalized[doc_id]):
            rejected += 1
        elif len(kept) < config.distractors:
            kept.append(doc_id)
    return kept, rejected


def gold_ranks(draft: Draft, corpus: Corpus, depth: int = LEAK_DEPTH) -> list[int | None]:
    """1-based rank of each gold document among the top ``depth`` BM25 hits for the full query
    (placeholders removed), None below. Rank 1 anywhere is leakage; all ranked means one
    search finds every gold document."""
    hits = corpus.lexical.search(_search_text(draft.query), depth)
    return [hits.index(d) + 1 if d in hits else None for d in draft.gold]


def _search_text(text: str) -> str:
    return PLACEHOLDER.sub(" ", text)


def to_task(draft: Draft, distractors: list[str], ranks: list[int | None], source: str) -> Task:
    """The SPEC §8 record, with the generator's provenance as extra fields."""
    digest = hashlib.sha1("\x1f".join([draft.template, *draft.gold, *draft.clues]).encode())
    return Task.model_validate(
        dict(
            id=f"offline-{draft.template}-{digest.hexdigest()[:12]}",
            query=draft.query,
            answer=draft.answer.title,
            answer_aliases=aliases_of(draft.answer),
            gold_doc_ids=list(draft.gold),
            distractor_doc_ids=distractors,
            domain=DOMAIN,
            hops=draft.hops,
            source=source,
            generator=OFFLINE_GENERATOR,  # provenance: extra fields, kept by Task
            template=draft.template,
            clues=list(draft.clues),
            gold_quotes={d: [e.quote for e in ev] for d, ev in draft.evidence.items()},
            bm25_top1_gold=1 in ranks,
            bm25_gold_ranks=ranks,
            bm25_answer_rank=_answer_rank(draft, ranks),
        )
    )


def _answer_rank(draft: Draft, ranks: list[int | None]) -> int | None:
    """The BM25 rank of the answer's own document; None when it is not gold (a chain's)."""
    gold = list(draft.gold)
    return ranks[gold.index(draft.answer.doc_id)] if draft.answer.doc_id in gold else None
