"""Stage 2, verify: the LLM extracts quotes per supporting document; string checks decide.

For each supporting document the model returns (as JSON) verbatim quotes and the clues each one
supports. It is trusted for nothing: :func:`~sleuth.datagen.evidence.verify_extraction` fails the
hop on an empty quote list, a quote not found in its document, a clue no quote supports, or an
answer that no supporting document contains (or that the clues give away), and every reason is
kept in the record's status. A document whose quotes fail the string check is asked again with a
new draw, up to ``extract_attempts`` times; the check itself never relaxes.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.datagen.evidence import QuoteEvidence, VerifyResult, verify_extraction
from sleuth.datagen.pipeline.llm import Message
from sleuth.datagen.pipeline.prompts import EXTRACT_SYSTEM, EXTRACT_USER
from sleuth.datagen.pipeline.records import Hop, Status, TaskRecord
from sleuth.datagen.pipeline.runner import Outcome, Pipeline
from sleuth.datagen.pipeline.structured import complete_json
from sleuth.datagen.quotes import quote_in_source

MAX_DOC_CHARS = 40_000
"""Longest document text sent for extraction. A longer document (an SEC filing) is sent as its
chunks most relevant to the clues, in document order; quotes are still checked against all of it."""


class ExtractedQuote(BaseModel):
    quote: str = Field(description="A passage copied exactly from the document.")
    clue_indices: list[int] = Field(default_factory=list, description="0-based clue numbers.")
    clue_spans: list[str] = Field(default_factory=list, description="Exact words of those clues.")


class Extraction(BaseModel):
    """The JSON the extraction call must return."""

    quotes: list[ExtractedQuote] = Field(default_factory=list)


def verify(pipeline: Pipeline, record: TaskRecord) -> Outcome:
    """Verify the record's first hop (later hops are verified by extend as they are made)."""
    result = verify_hop(pipeline, record.hops[0], stage="verify")
    if result.passed:
        return Status.PASSED, ""
    return Status.FAILED, "; ".join(result.reasons)


def verify_hop(pipeline: Pipeline, hop: Hop, stage: str) -> VerifyResult:
    """Extract quotes for every supporting document of ``hop`` and check them deterministically.

    The extracted evidence is stored on the hop whether or not it passes, for inspection.
    """
    texts = {d: pipeline.ws.docs.text(d) for d in hop.doc_ids}
    hop.evidence = {d: extract_quotes(pipeline, hop, d, texts[d], stage) for d in hop.doc_ids}
    return verify_extraction(
        texts, hop.clues, hop.answer, hop.answer_aliases, hop.evidence, question=hop.question
    )


def extract_quotes(
    pipeline: Pipeline, hop: Hop, doc_id: str, text: str, stage: str
) -> list[QuoteEvidence]:
    """The first draw whose quotes are non-empty and all found in ``text`` (else the last draw)."""
    messages = _messages(hop, doc_id, _excerpt(pipeline, hop, doc_id, text))
    evidence: list[QuoteEvidence] = []
    for attempt in range(pipeline.config.extract_attempts):
        reply, _ = complete_json(
            pipeline.llm, messages, Extraction, stage=stage, name="quotes", first_sample=attempt
        )
        evidence = [QuoteEvidence(**q.model_dump()) for q in reply.quotes] if reply else []
        if evidence and all(quote_in_source(e.quote, text) for e in evidence):
            break
    return evidence


def _excerpt(pipeline: Pipeline, hop: Hop, doc_id: str, text: str) -> str:
    if len(text) <= MAX_DOC_CHARS:
        return text
    query = " ".join([*hop.clues, hop.answer])
    ranked = pipeline.ws.scoped_search(query, [doc_id], k=len(text) // 200)
    kept, size = set(), 0
    for hit in ranked:
        if size + len(hit.text) <= MAX_DOC_CHARS:
            kept.add(hit.id)
            size += len(hit.text)
    rows = [r for r in pipeline.ws.index.document_chunks(doc_id) if r.id in kept]
    return "\n[...]\n".join(r.text for r in rows)


def _messages(hop: Hop, doc_id: str, text: str) -> list[Message]:
    clues = "\n".join(f"{i}. {clue}" for i, clue in enumerate(hop.clues))
    user = EXTRACT_USER.format(
        clues=clues, question=hop.question, answer=hop.answer, doc_id=doc_id, text=text
    )
    return [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": user}]
