"""Metadata filters: Chroma's ``where`` grammar, checked once, evaluated on both retrieval sides.

The dense side hands the checked filter to Chroma (``collection.query(where=...)``); the lexical
and grep sides evaluate the same filter over each document's metadata with :func:`matches`, which
follows Chroma's semantics (measured against Chroma 1.5, and tested against it):

* ``{"f": v}`` is ``{"f": {"$eq": v}}``; ``$eq`` needs the field present with a value of the same
  kind (strings, booleans, numbers; ``True`` is not 1);
* numbers compare numerically, except that Chroma compares a stored int with a float operand cut
  toward zero (``{"n": 0.5}`` matches ``n = 0``), which :func:`matches` copies;
* ``$ne`` and ``$nin`` are the negations of ``$eq`` and ``$in``, so a document without the field
  matches them;
* ``$gt``/``$gte``/``$lt``/``$lte`` take a number and match numeric (not boolean) values only;
* ``$in``/``$nin`` take a non-empty list of values of one type; ``$and``/``$or`` at least two
  filters; every object holds exactly one key.

Date fields (:data:`DATE` in the field types) are stored as epoch seconds (UTC ints); a filter may
name a date as an ISO string, which :func:`check_where` turns into seconds. A date without a time
is a whole day: ``{"$eq": "2001-05-04"}`` is that day, ``$lte``/``$gt`` reach its end,
``$gte``/``$lt`` its start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sleuth.corpus.models import to_epoch
from sleuth.errors import InputError

DATE = "date"
"""The field type of dates (stored as epoch seconds)."""
_RANGE = ("$gt", "$gte", "$lt", "$lte")
_OPS = ("$eq", "$ne", "$in", "$nin", *_RANGE)
_LOGIC = ("$and", "$or")
_SCALARS = (str, int, float, bool)
Where = dict[str, Any]


def parse_where(text: str | None) -> Where | None:
    """A ``--where`` option's JSON; None for none given."""
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"--where is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(value, dict):
        raise InputError('--where must be a JSON object, e.g. \'{"from": "a@b.com"}\'')
    return value


def check_where(where: Any, fields: Mapping[str, str]) -> Where:
    """``where`` checked against the grammar and the corpus's fields (name -> type), with dates
    turned into epoch seconds. Raises :class:`InputError` saying what is wrong, on one line."""
    if not isinstance(where, dict):
        raise InputError(f"where must be an object, got {type(where).__name__}")
    if len(where) != 1:
        raise InputError(f"where object must have exactly one key, got {len(where)}")
    ((key, value),) = where.items()
    if key in _LOGIC:
        if not isinstance(value, list) or len(value) < 2:
            raise InputError(f"{key} takes a list of at least two filters")
        return {key: [check_where(v, fields) for v in value]}
    if key.startswith("$"):
        raise InputError(f"unknown operator {key!r} (use $and, $or or a field name)")
    if key not in fields:
        known = ", ".join(sorted(fields)) or "none"
        raise InputError(f"unknown field {key!r}; this corpus has: {known}")
    op, operand = _operator(key, value)
    if fields[key] == DATE:
        return _date_filter(key, op, operand)
    if op in _RANGE and isinstance(operand, str):
        raise InputError(f"{op} on {key!r} needs a number ({key!r} is not a date field)")
    return {key: {op: operand}}


def _operator(key: str, value: Any) -> tuple[str, Any]:
    if not isinstance(value, dict):
        _scalar(key, value)
        return "$eq", value
    if len(value) != 1:
        raise InputError(f"filter on {key!r} must hold exactly one operator, got {len(value)}")
    ((op, operand),) = value.items()
    if op not in _OPS:
        raise InputError(f"unknown operator {op!r} on {key!r}; use one of {', '.join(_OPS)}")
    if op in _RANGE and (isinstance(operand, bool) or not isinstance(operand, int | float | str)):
        raise InputError(f"{op} on {key!r} needs a number (or an ISO date on a date field)")
    if op in ("$in", "$nin"):
        if not isinstance(operand, list) or not operand:
            raise InputError(f"{op} on {key!r} needs a non-empty list")
        for v in operand:
            _scalar(key, v)
        if len({type(v) for v in operand}) > 1:
            raise InputError(f"{op} on {key!r}: every value must have the same type")
    elif op not in _RANGE:
        _scalar(key, operand)
    return op, operand


def _scalar(key: str, value: Any) -> None:
    if not isinstance(value, _SCALARS):
        raise InputError(f"value for {key!r} must be a string, number or boolean")


def _date_filter(key: str, op: str, operand: Any) -> Where:
    """A filter on a date field with ISO strings turned into epoch seconds."""
    values = operand if isinstance(operand, list) else [operand]
    if not any(isinstance(v, str) for v in values):
        return {key: {op: operand}}
    if op not in ("$eq", *_RANGE):
        raise InputError(f"{op} on date field {key!r}: compare dates with $eq or $gte/$lt ranges")
    start, end, whole_day = _date_bounds(key, operand)
    if op == "$eq":
        if not whole_day:
            return {key: {"$eq": start}}
        return {"$and": [{key: {"$gte": start}}, {key: {"$lte": end}}]}
    return {key: {op: end if op in ("$lte", "$gt") else start}}


def _date_bounds(key: str, text: str) -> tuple[int, int, bool]:
    """First and last second of ``text`` (a day or a moment), and whether it was a whole day."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
            return start, start + 86399, True
        moment = to_epoch(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise InputError(f"{text!r} on date field {key!r} is not an ISO date") from None
    return moment, moment, False


def from_epoch(seconds: float) -> str:
    """An epoch-seconds date as ISO text: the day alone when it is midnight UTC."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=int(seconds))
    if moment.hour == moment.minute == moment.second == 0:
        return moment.date().isoformat()
    return moment.isoformat().replace("+00:00", "Z")


# -- evaluation (the lexical and grep sides) -------------------------------------------
def matches(where: Where, meta: Mapping[str, Any]) -> bool:
    """Whether a document's metadata passes a checked filter (Chroma's semantics)."""
    ((key, value),) = where.items()
    if key == "$and":
        return all(matches(w, meta) for w in value)
    if key == "$or":
        return any(matches(w, meta) for w in value)
    ((op, operand),) = value.items()
    present = key in meta
    got = meta.get(key)
    if op == "$eq":
        return present and _same(got, operand)
    if op == "$ne":
        return not (present and _same(got, operand))
    if op == "$in":
        return present and any(_same(got, v) for v in operand)
    if op == "$nin":
        return not (present and any(_same(got, v) for v in operand))
    if not present or not _number(got) or not _number(operand):
        return False
    operand = _as_stored(got, operand)
    if op == "$gt":
        return bool(got > operand)
    if op == "$gte":
        return bool(got >= operand)
    if op == "$lt":
        return bool(got < operand)
    return bool(got <= operand)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _as_stored(got: Any, operand: Any) -> Any:
    """Chroma compares an int value with a float operand cut to an int (toward zero)."""
    return int(operand) if isinstance(got, int) and isinstance(operand, float) else operand


def _same(got: Any, operand: Any) -> bool:
    if isinstance(got, bool) or isinstance(operand, bool):
        return isinstance(got, bool) and isinstance(operand, bool) and got == operand
    if isinstance(got, str) or isinstance(operand, str):
        return isinstance(got, str) and isinstance(operand, str) and got == operand
    return bool(got == _as_stored(got, operand))
