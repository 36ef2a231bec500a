"""Deterministic verification of an extraction: quotes, clue coverage and the answer.

An LLM (or the offline generator) proposes, for each supporting document, verbatim quotes and the
clues each quote supports. Nothing it says is trusted: every check here is a string check, and
every failure is reported, not just the first. Unlike the public pipeline, an empty quote list
fails, every quote (not two thirds) must match, every clue must be covered, and the answer is
compared with the documents rather than with a quote the model labelled as the answer.

Each reason reads ``"<code>: <detail>"``; :func:`reason_code` recovers the code for tallies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from sleuth.datagen.quotes import normalize, quote_in_source


class FailReason(StrEnum):
    """Why an extraction fails; the code that starts each reason string."""

    NO_CLUES = "no_clues"
    NO_QUOTES = "no_quotes"
    UNKNOWN_DOCUMENT = "unknown_document"
    QUOTE_NOT_FOUND = "quote_not_found"
    BAD_CLUE_INDEX = "bad_clue_index"
    CLUE_SPAN_NOT_FOUND = "clue_span_not_found"
    CLUE_UNSUPPORTED = "clue_unsupported"
    ANSWER_NOT_IN_GOLD = "answer_not_in_gold"
    ANSWER_IN_CLUES = "answer_in_clues"


class QuoteEvidence(BaseModel):
    """One verbatim quote from a supporting document and the clues it supports."""

    model_config = ConfigDict(frozen=True)

    quote: str
    """Text that must occur in the document (after :func:`~sleuth.datagen.quotes.normalize`)."""
    clue_indices: list[int] = Field(default_factory=list)
    """0-based indices of the clues this quote supports."""
    clue_spans: list[str] = Field(default_factory=list)
    """Exact spans of clue text this quote supports; each must occur in some clue."""


class VerifyResult(BaseModel):
    """The verdict; ``reasons`` is empty exactly when ``passed``."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    reasons: list[str] = Field(default_factory=list)


def reason_code(reason: str) -> str:
    """The :class:`FailReason` code at the start of a reason string."""
    return reason.split(":", 1)[0]


def answer_pattern(answer: str, aliases: Sequence[str] = ()) -> re.Pattern[str] | None:
    """A regex over normalised text for the answer or any alias, or None if none has a word.

    Boundaries are word boundaries that also refuse to split a number: ``3`` is not found in
    ``3.5`` and ``1950`` is not found in ``1950s``.
    """
    unique = {normalize(a) for a in (answer, *aliases)}
    forms = sorted((f for f in unique if re.search(r"\w", f)), key=lambda f: (-len(f), f))
    if not forms:
        return None
    body = "|".join(map(re.escape, forms))
    return re.compile(rf"(?<!\w)(?<!\d[.,])(?:{body})(?!\w)(?![.,]\d)")


def answer_in_text(answer: str, aliases: Sequence[str], text: str) -> bool:
    """True when the answer or any alias occurs in ``text`` as a whole word sequence.

    Shared by the gold check (the answer must be in a supporting document), the leak check (it
    must not be in the clues) and distractor rejection (it must not be in a distractor).

    Example::

        >>> answer_in_text("Paris", [], "He moved to Paris, France.")
        True
        >>> answer_in_text("Paris", [], "a Parisian cafe")
        False
    """
    pattern = answer_pattern(answer, aliases)
    return pattern is not None and pattern.search(normalize(text)) is not None


def verify_extraction(
    documents: Mapping[str, str],
    clues: Sequence[str],
    answer: str,
    aliases: Sequence[str],
    extraction: Mapping[str, Sequence[QuoteEvidence]],
    question: str = "",
) -> VerifyResult:
    """Check an extraction against its supporting documents; collect every failure.

    Args:
        documents: supporting document id → full text.
        clues: the task's clues, in order; quotes refer to them by index or span.
        answer: the task's answer; ``aliases`` are accepted alternatives.
        extraction: document id → quotes extracted from that document.
        question: the question text; like the clues, it must not contain the answer.

    Returns:
        ``VerifyResult(passed=True)`` or the failures, each ``"<code>: <detail>"``.
    """
    reasons = _check_coverage(documents, clues, extraction)
    reasons += _check_answer(documents, clues, answer, aliases, question)
    return VerifyResult(passed=not reasons, reasons=reasons)


def _check_coverage(
    documents: Mapping[str, str],
    clues: Sequence[str],
    extraction: Mapping[str, Sequence[QuoteEvidence]],
) -> list[str]:
    reasons = [] if clues else [f"{FailReason.NO_CLUES}: the task has no clues"]
    reasons += [
        f"{FailReason.UNKNOWN_DOCUMENT}: {doc_id} is not a supporting document"
        for doc_id in extraction
        if doc_id not in documents
    ]
    covered: set[int] = set()
    for doc_id, text in documents.items():
        quotes = extraction.get(doc_id) or []
        if not quotes:
            reasons.append(f"{FailReason.NO_QUOTES}: {doc_id}")
        for evidence in quotes:
            reasons += _check_quote(doc_id, text, evidence, clues, covered)
    reasons += [
        f"{FailReason.CLUE_UNSUPPORTED}: clue {i} has no supporting quote"
        for i in range(len(clues))
        if i not in covered
    ]
    return reasons


def _check_quote(
    doc_id: str, text: str, evidence: QuoteEvidence, clues: Sequence[str], covered: set[int]
) -> list[str]:
    """Reasons this quote fails; adds the clues it validly supports to ``covered``."""
    if not quote_in_source(evidence.quote, text):
        # A quote that is not in the document supports nothing.
        return [f"{FailReason.QUOTE_NOT_FOUND}: {doc_id}: {_short(evidence.quote)!r}"]
    reasons = []
    for i in evidence.clue_indices:
        if 0 <= i < len(clues):
            covered.add(i)
        else:
            reasons.append(f"{FailReason.BAD_CLUE_INDEX}: {doc_id}: {i}")
    for span in evidence.clue_spans:
        hits = [i for i, clue in enumerate(clues) if quote_in_source(span, clue)]
        if not hits:
            reasons.append(f"{FailReason.CLUE_SPAN_NOT_FOUND}: {doc_id}: {_short(span)!r}")
        covered.update(hits)
    return reasons


def _check_answer(
    documents: Mapping[str, str],
    clues: Sequence[str],
    answer: str,
    aliases: Sequence[str],
    question: str,
) -> list[str]:
    reasons = []
    if not any(answer_in_text(answer, aliases, text) for text in documents.values()):
        reasons.append(f"{FailReason.ANSWER_NOT_IN_GOLD}: {answer!r} (or an alias)")
    if any(answer_in_text(answer, aliases, text) for text in (*clues, question)):
        reasons.append(f"{FailReason.ANSWER_IN_CLUES}: {answer!r} (or an alias)")
    return reasons


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
