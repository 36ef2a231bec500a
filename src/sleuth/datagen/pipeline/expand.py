"""Stage 5, expand: gold-equivalence groups, so reward and metrics can count facts.

Filings (and many corpora) state one fact in several places: a 10-K and a 10-Q, the overlap of
two chunks, a press release quoted in an 8-K. Each verified quote is one fact; its group is every
chunk that states it:

1. the chunks of its own document that contain the quote (the fallback, for a quote cut by a
   chunk boundary, is the chunk sharing most of its words);
2. hybrid-search hits of the quote (BM25 + dense, fused) that contain it verbatim after
   :func:`~sleuth.datagen.quotes.normalize` (near duplicates, found deterministically);
3. optionally, hits that share most of the quote's words but not its exact text, when the LLM
   copies from them a passage stating the same fact *and* that passage is in the chunk and
   carries every number of the original quote.

Identical groups are merged; no group is ever empty. Distractors that state a gold fact are
removed from the task, since finding them is finding the fact.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from sleuth.corpus.models import doc_id_of
from sleuth.datagen.pipeline.records import Status, TaskRecord
from sleuth.datagen.pipeline.runner import Outcome, Pipeline
from sleuth.datagen.pipeline.structured import complete_json
from sleuth.datagen.quotes import normalize, quote_in_source
from sleuth.index.lexical import ChunkRow

NEAR_DUPLICATE_OVERLAP = 0.6
"""Share of the quote's words a chunk must contain before the LLM is asked about it."""

_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

EQUIVALENT_SYSTEM = """\
You compare a passage with a fact. If the passage states the same fact (same event, same
figures, same date, possibly in other words), copy the sentence of the passage that states it,
character for character. Reply with JSON only."""

EQUIVALENT_USER = """\
Fact: {quote}

Passage {chunk_id}:
<passage>
{text}
</passage>"""


class Equivalence(BaseModel):
    same_fact: bool
    quote: str = ""


def expand(pipeline: Pipeline, record: TaskRecord) -> Outcome:
    """Set ``record.task.gold_chunk_groups`` from the verified quotes of every hop."""
    assert record.task is not None, "extend assembles the task before expand"
    groups: list[list[str]] = []
    for hop in record.hops:
        for doc_id, evidence in hop.evidence.items():
            for e in evidence:
                group = fact_group(pipeline, doc_id, e.quote)
                if group and set(group) not in [set(g) for g in groups]:
                    groups.append(group)
    if not groups:
        return Status.FAILED, "no_fact_groups"
    record.task.gold_chunk_groups = groups
    # A document that states a gold fact is gold-equivalent, not a distractor.
    stating = {doc_id_of(c) for g in groups for c in g}
    record.task.distractor_doc_ids = [d for d in record.task.distractor_doc_ids if d not in stating]
    extra = sum(len(g) for g in groups) - len(groups)
    return Status.PASSED, f"{len(groups)} facts, {extra} extra chunks"


def fact_group(pipeline: Pipeline, doc_id: str, quote: str) -> list[str]:
    """Chunk ids stating the fact of ``quote`` (from document ``doc_id``), own chunks first."""
    own = pipeline.ws.index.document_chunks(doc_id)
    group = [r.id for r in own if quote_in_source(quote, r.text)] or _closest(own, quote)
    fused = pipeline.ws.toolbox.fused_candidates(quote)[: pipeline.config.expand_candidates]
    for chunk_id, _ in fused:
        row = pipeline.ws.index.chunk(chunk_id)
        if row is None or row.id in group:
            continue
        if quote_in_source(quote, row.text) or _confirmed(pipeline, quote, row):
            group.append(row.id)
    return group


def _closest(rows: list[ChunkRow], quote: str) -> list[str]:
    if not rows:
        return []
    best = max(rows, key=lambda r: word_overlap(quote, r.text))
    return [best.id]


def word_overlap(quote: str, text: str) -> float:
    """Share of the quote's distinct words that occur in ``text`` (after normalisation)."""
    words = set(_WORD.findall(normalize(quote)))
    return len(words & set(_WORD.findall(normalize(text)))) / len(words) if words else 0.0


def _confirmed(pipeline: Pipeline, quote: str, row: ChunkRow) -> bool:
    """LLM-confirmed near duplicate whose copied passage passes the string checks."""
    if (
        not pipeline.config.judge_equivalents
        or word_overlap(quote, row.text) < NEAR_DUPLICATE_OVERLAP
    ):
        return False
    user = EQUIVALENT_USER.format(quote=quote, chunk_id=row.id, text=row.text)
    messages = [{"role": "system", "content": EQUIVALENT_SYSTEM}, {"role": "user", "content": user}]
    reply, _ = complete_json(
        pipeline.llm, messages, Equivalence, stage="expand", name="equivalence"
    )
    if reply is None or not reply.same_fact or not quote_in_source(reply.quote, row.text):
        return False
    return set(_NUMBER.findall(normalize(quote))) <= set(_NUMBER.findall(normalize(reply.quote)))
