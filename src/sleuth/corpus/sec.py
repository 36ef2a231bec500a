"""SEC filings: EDGAR primary documents (HTML, inline XBRL) and Markdown renderings.

One filing becomes one document. Its metadata comes from the file name and the cover page:

* ``accession``: the EDGAR accession number when the file is named by it
  (``0000950153-99-001234.html``), which is also the document id; otherwise the file stem;
* ``company``: the registrant, the line above "(Exact name of registrant as specified in its
  charter)", or the first company a combined filing says it is "filed by";
* ``form``: the first ``FORM 10-K`` (10-Q, 20-F, 8-K...) on the cover page, else a form in
  the file or folder name (``Apple.10-K.md``, ``8-K/...``);
* ``date`` (ISO) and ``date_kind``: the period end ("fiscal year ended", "quarterly period
  ended") or the report date of a current report;
* ``ticker``: the first trading symbol listed on the cover page, when there is one.

Inline XBRL's hidden header (``<ix:header>``) is dropped; in Markdown, HTML tags and the empty
layout tables the renderer leaves behind are removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from sleuth.corpus.files import ReadOptions, folder_files
from sleuth.corpus.html import html_to_text
from sleuth.corpus.models import Document
from sleuth.errors import InputError

SEC_SUFFIXES = {".html", ".htm", ".md", ".markdown", ".txt"}
CURRENT_REPORTS = {"8-K", "6-K"}
_NOT_FILINGS = {"NOTICE", "README", "LICENSE"}
"""File stems skipped when a folder is walked (documentation beside the filings)."""
COVER_CHARS = 8000
"""How much of the start of a filing is searched for cover-page fields."""

_ACCESSION = re.compile(r"\d{10}-\d{2}-\d{6}")
_FORMS = r"10-K405|10-KSB|10-K|10-QSB|10-Q|20-F|40-F|8-K|6-K|S-1|DEF 14A"
_FORM = re.compile(rf"\bFORM\s+({_FORMS})\b", re.IGNORECASE)
_FORM_IN_NAME = re.compile(rf"(?<![\w-])({_FORMS})(?![\w-])", re.IGNORECASE)
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
)
_DATE = rf"({_MONTH}\s+\d{{1,2}},?\s+\d{{4}})"
_PERIOD = re.compile(rf"(?:year|period)\s+ended:?\s*{_DATE}", re.IGNORECASE)
_REPORT = re.compile(rf"date\s+of\s+report[^:]{{0,60}}?\)?\s*:?\s*{_DATE}", re.IGNORECASE)
_ANY_DATE = re.compile(_DATE, re.IGNORECASE)
_REGISTRANT = re.compile(r"exact name of registrant", re.IGNORECASE)
_CORPORATE = r"(?:Company|Inc\.?|Corporation|Corp\.|N\.V\.|Ltd\.?|LLC|plc)"
_FILED_BY = re.compile(rf"filed by\s+([A-Z][\w.,&' -]{{2,80}}?{_CORPORATE})")
_TICKER_AREA = re.compile(r"trading\s+symbol", re.IGNORECASE)
_TICKER = re.compile(r"(?<![\w$.-])[A-Z]{1,5}(?![\w.-])")
_NOT_TICKERS = {"LLC", "NYSE", "THE", "INC", "USD", "EUR", "N", "A", "NONE", "NA"}
_IX_HEADER = re.compile(r"<ix:header>.*?</ix:header>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_BLANK_ROW = re.compile(r"^\|(?:\s*\|)+\s*$")
_TRAILING_CELLS = re.compile(r"(?:\|\s*)+\|$")
_RULE_ROW = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+\s*$")


def read_sec(path: str | Path, options: ReadOptions | None = None) -> Iterator[Document]:
    """Every filing under ``path`` (a file or a folder of ``.html``/``.htm``/``.md`` files)."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", source=str(path))
    if path.is_file():
        files = [path]
    else:
        files = [p for p in folder_files(path, options or ReadOptions()) if _is_filing(p)]
    for file in files:
        yield read_sec_filing(file)


def read_sec_filing(path: str | Path) -> Document:
    """One filing as a document (see the module docstring for its metadata).

    Raises:
        InputError: unreadable file, empty text, or no cover page (neither form nor company).
    """
    path = Path(path)
    source = str(path)
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read SEC filing: {e}", source=source) from None
    text = _markdown_text(raw) if path.suffix.lower() in {".md", ".markdown"} else _html_text(raw)
    if not text.strip():
        raise InputError("filing has no text", source=source)
    metadata = filing_metadata(text, path)
    if not metadata.get("form") and not metadata.get("company"):
        raise InputError("no SEC cover page found (no form type, no registrant)", source=source)
    doc_id = metadata.get("accession") or path.stem
    title = " ".join(str(metadata.get(k)) for k in ("company", "form", "date") if metadata.get(k))
    return Document(id=doc_id, text=text, title=title or path.stem, metadata=metadata)


def filing_metadata(text: str, path: Path) -> dict[str, Any]:
    """Accession, company, form, date (a ``date``) and ticker of a filing (keys absent when not
    found)."""
    cover = text[:COVER_CHARS]
    flat = " ".join(cover.split())
    found = {
        "accession": _first(_ACCESSION, path.name),
        "company": _company(cover, flat),
        "form": (_first(_FORM, flat) or _first(_FORM_IN_NAME, path.as_posix()) or "").upper(),
        "ticker": _ticker(flat),
        "source": path.name,
        "domain": "sec",
    }
    date, kind = _date(flat, current_report=found["form"] in CURRENT_REPORTS)
    found |= {"date_kind": kind}
    typed: dict[str, Any] = {k: v for k, v in found.items() if v}
    if date:
        typed["date"] = datetime.strptime(date, "%Y-%m-%d").date()
    return typed


def _company(cover: str, flat: str) -> str:
    lines = [line.strip() for line in cover.splitlines()]
    for i, line in enumerate(lines):
        if _REGISTRANT.search(line):
            above = [x for x in lines[:i] if re.search(r"[A-Za-z]{2}", x)]
            if above:
                return " ".join(above[-1].split())
    return _first(_FILED_BY, flat) or ""


def _date(flat: str, current_report: bool) -> tuple[str, str]:
    """A current report (8-K) is dated by its event; other forms by the period they cover."""
    if current_report:
        order = [(_REPORT, "report_date"), (_ANY_DATE, "report_date")]
    else:
        order = [(_PERIOD, "period_end"), (_ANY_DATE, "cover")]
    for pattern, kind in order:
        match = pattern.search(flat)
        if match:
            parsed = _iso(match.group(1))
            if parsed:
                return parsed, kind
    return "", ""


def _iso(date: str) -> str:
    cleaned = " ".join(date.replace(",", " ").split()).title()
    try:
        return datetime.strptime(cleaned, "%B %d %Y").date().isoformat()
    except ValueError:
        return ""


def _ticker(flat: str) -> str:
    area = _TICKER_AREA.search(flat)
    if not area:
        return ""
    window = flat[area.end() : area.end() + 300]
    registered = window.lower().find("registered")
    window = window[registered + len("registered") :] if registered >= 0 else window
    symbols = [t for t in _TICKER.findall(window) if t not in _NOT_TICKERS]
    return symbols[0] if symbols else ""


def _first(pattern: re.Pattern[str], text: str) -> str:
    match = pattern.search(text)
    return (match.group(1) if match.groups() else match.group()) if match else ""


def _html_text(raw: str) -> str:
    return html_to_text(_IX_HEADER.sub(" ", raw))[1]


def _markdown_text(raw: str) -> str:
    """Markdown without HTML tags, blank table rows, or rules left without a header row; cell
    padding is squeezed to one space (it is most of a rendered table's tokens)."""
    kept: list[str] = []
    for line in raw.splitlines():
        line = _TAG.sub("", line).rstrip()
        if _BLANK_ROW.match(line):
            continue
        if _RULE_ROW.match(line) and not (kept and kept[-1].startswith("|")):
            continue
        kept.append(_squeeze_row(line) if line.startswith("|") else line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def _squeeze_row(line: str) -> str:
    """One space of padding per cell, and trailing empty cells dropped."""
    return _TRAILING_CELLS.sub("|", re.sub(r"\s{2,}", " ", line))


def _is_filing(path: Path) -> bool:
    hidden = path.name.startswith(".") or path.stem.upper() in _NOT_FILINGS
    return path.is_file() and path.suffix.lower() in SEC_SUFFIXES and not hidden
