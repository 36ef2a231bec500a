"""Deterministic checks on what an author agent submits, returned to it as fixable errors.

These run before any verification call, so an obviously broken puzzle (a clue with a year in it,
an answer spelled out in the question, a document the agent never read) costs one more agent
turn instead of a verification round. Verification still re-checks everything that matters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sleuth.datagen.evidence import answer_in_text
from sleuth.datagen.pipeline.workspace import Session

_YEAR = re.compile(r"(?<![\d.,])(?:1[0-9]|20)\d{2}(?!\d)")
MIN_TITLE_CHARS = 4


def check_documents(
    doc_ids: Sequence[str], session: Session, banned: Sequence[str] = ()
) -> list[str]:
    """Supporting documents are distinct, exist, lie in scope, were read, and are not banned."""
    errors = []
    if len(set(doc_ids)) != len(doc_ids):
        errors.append("supporting documents must be distinct")
    for doc_id in doc_ids:
        if not session.allowed(doc_id):
            errors.append(f"{doc_id}: no such document in your part of the collection")
        elif doc_id not in session.read_docs:
            errors.append(f"{doc_id}: read it with read_document before submitting it")
        elif doc_id in banned:
            errors.append(f"{doc_id}: already used by an earlier hop; pick another document")
    return errors


def check_wording(
    clues: Sequence[str],
    question: str,
    hidden: Sequence[tuple[str, Sequence[str]]],
    titles: Sequence[str] = (),
) -> list[str]:
    """Clues and question carry no four-digit year, no hidden string and no document title.

    ``hidden`` pairs each string that must stay hidden (an answer, a shared fact) with its aliases.
    """
    errors = []
    texts = [*(f"clue {i}" for i in range(len(clues))), "question"]
    for label, text in zip(texts, [*clues, question], strict=True):
        if _YEAR.search(text):
            errors.append(f"{label} contains an exact year; describe the period in words")
        for value, aliases in hidden:
            if answer_in_text(value, aliases, text):
                errors.append(f"{label} gives away {value!r}; rephrase it")
        for title in titles:
            if len(title) >= MIN_TITLE_CHARS and answer_in_text(title, [], text):
                errors.append(f"{label} names a document title ({title!r}); describe it instead")
    return errors


def check_answer_found(answer: str, aliases: Sequence[str], texts: Sequence[str]) -> list[str]:
    """The answer (or an alias) is written in at least one of ``texts``."""
    if any(answer_in_text(answer, aliases, t) for t in texts):
        return []
    return [f"the answer {answer!r} is not written in any supporting document; copy it exactly"]
