"""Parse the policy's final answer: a ranked list of documents with justifications.

The expected form (report §2.6) is, per document::

    <Document id="DOC_ID"><Justification>1-3 sentences</Justification></Document>

Models drift from it, so parsing is lenient: the id may be quoted, single-quoted, braced or bare;
a missing ``</Document>`` or justification is noted, not fatal. An answer with no document block
at all is *malformed*; its fallback list is every seen chunk or document id the text (or, when
the text is empty, the reasoning) mentions, in order of first mention.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from pydantic import BaseModel, Field

from sleuth.corpus import doc_id_of
from sleuth.harness.prompt import MAX_DOCUMENTS

_OPEN = re.compile(
    r"<Document\b[^>]*?\bid\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|\{([^}]*)\}|([^\s>/]+))[^>]*>",
    re.IGNORECASE,
)
_CLOSE = re.compile(r"</Document\s*>", re.IGNORECASE)
_JUSTIFICATION = re.compile(
    r"<Justification>(.*?)(?:</Justification\s*>|$)", re.IGNORECASE | re.DOTALL
)


class AnswerDocument(BaseModel):
    """One entry of the final list."""

    id: str  # exactly as the policy wrote it (a chunk or a document id)
    doc_id: str  # the document it names
    rank: int  # 1 = most relevant
    justification: str = ""


class ParsedAnswer(BaseModel):
    """The final list, whether it was well formed, and what was wrong with it."""

    documents: list[AnswerDocument] = Field(default_factory=list)
    malformed: bool = False
    problems: list[str] = Field(default_factory=list)

    @property
    def doc_ids(self) -> list[str]:
        """Document ids in rank order, each once."""
        return list(dict.fromkeys(d.doc_id for d in self.documents))


def resolve_doc_id(any_id: str, known_chunks: Mapping[str, str]) -> str:
    """The document an id names, using seen chunks first (doc ids may end in ``_<digits>``)."""
    if any_id in known_chunks:
        return known_chunks[any_id]
    if any_id in set(known_chunks.values()):
        return any_id
    return doc_id_of(any_id)


def parse_answer(
    text: str,
    *,
    reasoning: str | None = None,
    known_chunks: Mapping[str, str] | None = None,
    max_documents: int = MAX_DOCUMENTS,
) -> ParsedAnswer:
    """Parse a final answer, falling back to mentioned ids when it has no document blocks.

    Args:
        text: the policy's final reply.
        reasoning: its reasoning, searched for ids only when ``text`` is blank.
        known_chunks: every chunk id the policy was shown, mapped to its document id.
        max_documents: entries past this many are dropped (and noted).

    Returns:
        The parsed list; ``malformed`` is set when no ``<Document id=...>`` block was found.

    Example::

        >>> reply = '<Document id="a_1"><Justification>X.</Justification></Document>'
        >>> parse_answer(reply).doc_ids
        ['a']
    """
    known = dict(known_chunks or {})
    problems: list[str] = []
    documents = _parse_blocks(text, known, problems)
    if not documents:
        source = text if text.strip() else (reasoning or "")
        problems.append("no <Document id=...> block" if text.strip() else "empty answer")
        documents = _fallback(source, known)
        return ParsedAnswer(documents=documents[:max_documents], malformed=True, problems=problems)
    if len(documents) > max_documents:
        problems.append(f"{len(documents)} documents listed; kept the first {max_documents}")
        documents = documents[:max_documents]
    if known:
        unknown = [d.id for d in documents if d.id not in known and d.doc_id not in known.values()]
        if unknown:
            problems.append(f"ids never shown: {', '.join(unknown)}")
    return ParsedAnswer(documents=documents, problems=problems)


def _parse_blocks(text: str, known: Mapping[str, str], problems: list[str]) -> list[AnswerDocument]:
    opens = list(_OPEN.finditer(text))
    documents: list[AnswerDocument] = []
    seen: set[str] = set()
    for i, match in enumerate(opens):
        end = opens[i + 1].start() if i + 1 < len(opens) else len(text)
        body = text[match.end() : end]
        raw_id = next(g for g in match.groups() if g is not None).strip().strip("{}\"' ")
        if not raw_id:
            problems.append(f"block {i + 1}: empty id")
            continue
        if raw_id in seen:
            problems.append(f"duplicate id {raw_id}")
            continue
        seen.add(raw_id)
        close = _CLOSE.search(body)
        if close is None:
            problems.append(f"{raw_id}: no </Document>")
        else:
            body = body[: close.start()]
        justification = _justification(body)
        if not justification:
            problems.append(f"{raw_id}: no justification")
        doc_id = resolve_doc_id(raw_id, known)
        documents.append(
            AnswerDocument(
                id=raw_id, doc_id=doc_id, rank=len(documents) + 1, justification=justification
            )
        )
    return documents


def _justification(body: str) -> str:
    """The justification's text, whitespace collapsed and XML entities decoded (writers escape
    ``<``, ``&`` and quotes so that quoted evidence cannot close the tag early)."""
    match = _JUSTIFICATION.search(body)
    return " ".join(html.unescape(match.group(1)).split()) if match else ""


def _fallback(text: str, known: Mapping[str, str]) -> list[AnswerDocument]:
    """Seen chunk and document ids mentioned in ``text``, in order of first mention."""
    candidates = set(known) | set(known.values())
    found: list[tuple[int, str]] = []
    for any_id in candidates:
        match = re.search(rf"(?<![\w-]){re.escape(any_id)}(?![\w-])", text)
        if match:
            found.append((match.start(), any_id))
    ordered = [any_id for _, any_id in sorted(found)]
    return [
        AnswerDocument(id=any_id, doc_id=resolve_doc_id(any_id, known), rank=rank)
        for rank, any_id in enumerate(ordered, start=1)
    ]
