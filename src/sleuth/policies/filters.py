"""When a question names a sender, a date or a kind of document, the ``where`` filter for it.

Conservative by design: a filter is built only from what ``describe_corpus`` showed (the field
must exist, a sender or document type must be one listed value, a date must fall in the field's
range) and only when exactly one reading matches; anything else gives no filter. A named day,
month or year is widened by a day on each side: the writer's local day is not the stored UTC day
(an email sent at 17:04 -0700 on 17 August is stored on 18 August UTC).
"""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from typing import Any

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = "|".join(m.title() for m in _MONTHS) + "|" + "|".join(m[:3].title() for m in _MONTHS)
_DAY = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}),?\s+((?:19|20)\d\d)\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH})\.?,?\s+(?:of\s+)?((?:19|20)\d\d)\b")
_ISO_DAY = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_YEAR = re.compile(r"\b(?:in|during)\s+((?:19|20)\d\d)\b")
_FORM = re.compile(r"\b(?:10-K|10-Q|8-K|20-F|S-1|DEF 14A)\b")
_SLACK = timedelta(days=1)
SENDER_FIELDS = ("from", "sender", "author")
DATE_FIELDS = ("date", "sent", "published")
TYPE_FIELDS = ("form", "kind", "type", "doc_type", "document_type", "category")


def has_filter_cue(question: str) -> bool:
    """Whether the question may name a sender, a date or a document type (worth describing the
    corpus first)."""
    cues = (_EMAIL, _DAY, _MONTH_YEAR, _ISO_DAY, _YEAR, _FORM)
    return any(p.search(question) for p in cues) or bool(_sender_words(question))


_NAME = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+"
_SENDER_CUES = (
    re.compile(rf"\b(?:from|by|sent|wrote|emailed)\s+({_NAME})"),
    re.compile(rf"\b({_NAME})\s+(?:write|wrote|send|sent|email|emailed)\b"),
)


def _sender_words(question: str) -> list[str]:
    return [name for cue in _SENDER_CUES for name in cue.findall(question)]


def parse_description(text: str) -> dict[str, dict[str, Any]]:
    """Field name -> its entry, read back from the rendered ``describe_corpus`` block."""
    fields = {}
    for line in text.splitlines():
        name, sep, entry = line[2:].partition(": ")
        if line.startswith("- ") and sep:
            try:
                fields[name] = json.loads(entry)
            except json.JSONDecodeError:
                continue
    return fields


def question_filter(question: str, description: str) -> dict[str, Any] | None:
    """The ``where`` for the question's sender, dates and document type; None when none is
    unambiguous."""
    fields = parse_description(description)
    parts = [
        p
        for p in (
            _sender(question, fields),
            _dates(question, fields),
            _doc_type(question, fields),
        )
        if p is not None
    ]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def _one_field(fields: dict[str, dict[str, Any]], names: tuple[str, ...], kind: str) -> str | None:
    found = [n for n in names if fields.get(n, {}).get("type") == kind]
    return found[0] if len(found) == 1 else None


def _listed(entry: dict[str, Any]) -> list[str]:
    return [str(v) for v in {**entry.get("values", {}), **entry.get("top_values", {})}]


def _sender(question: str, fields: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    field = _one_field(fields, SENDER_FIELDS, "string")
    if field is None:
        return None
    addresses = sorted({a.lower().rstrip(".") for a in _EMAIL.findall(question)})
    if len(addresses) == 1:
        return {field: addresses[0]}
    if addresses:
        return None
    named = {w.lower() for w in re.findall(r"[A-Za-z]+", question)}
    hits = []
    for value in _listed(fields[field]):
        local = value.split("@")[0].lower()
        parts = [p for p in re.split(r"[._-]+", local) if len(p) > 1]
        if len(parts) >= 2 and all(p in named for p in parts):
            hits.append(value)
    return {field: hits[0]} if len(hits) == 1 else None


def _dates(question: str, fields: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    field = _one_field(fields, DATE_FIELDS, "date")
    if field is None:
        return None
    spans = _date_spans(question)
    if len(spans) != 1:
        return None
    start, end = spans[0]
    low, high = str(fields[field].get("min", ""))[:10], str(fields[field].get("max", ""))[:10]
    if not low or end.isoformat() < low or start.isoformat() > high:
        return None
    # a day named in a question is local to its writer; stored days are UTC: one day of slack
    start, end = start - _SLACK, end + _SLACK
    return {"$and": [{field: {"$gte": start.isoformat()}}, {field: {"$lte": end.isoformat()}}]}


def _date_spans(question: str) -> list[tuple[date, date]]:
    """Every day, month or year the question names, as first and last day."""
    spans: list[tuple[date, date]] = []
    for m in _DAY.finditer(question):
        day = _day(int(m.group(3)), _month(m.group(1)), int(m.group(2)))
        if day:
            spans.append((day, day))
    for m in _ISO_DAY.finditer(question):
        day = _day(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if day:
            spans.append((day, day))
    if not spans:
        for m in _MONTH_YEAR.finditer(question):
            year, month = int(m.group(2)), _month(m.group(1))
            nxt = date(year + month // 12, month % 12 + 1, 1)
            spans.append((date(year, month, 1), date.fromordinal(nxt.toordinal() - 1)))
    if not spans:
        spans = [(date(int(y), 1, 1), date(int(y), 12, 31)) for y in _YEAR.findall(question)]
    return list(dict.fromkeys(spans))


def _month(name: str) -> int:
    return [m[:3] for m in _MONTHS].index(name[:3].lower()) + 1


def _day(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _doc_type(question: str, fields: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    hits = []
    for name in TYPE_FIELDS:
        entry = fields.get(name, {})
        if entry.get("type") != "string" or "values" not in entry:
            continue
        for value in entry["values"]:
            if re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", question):
                hits.append((name, value))
    return {hits[0][0]: hits[0][1]} if len(hits) == 1 else None
