"""Patents: PatentsView CSV exports and USPTO full-text XML (grants and applications).

Ids are ``US<number>`` with leading zeros dropped (``US06859910`` → ``US6859910``), the same
form cited references are normalised to, so a citation can be looked up in the corpus.

* **CSV** (``patent_number, patent_date, patent_title, patent_abstract``): one document per row.
  Some exports wrap a field in an extra pair of quotes with the inner quotes doubled once more;
  that layer is removed.
* **XML** (USPTO ICE, ``us-patent-grant`` / ``us-patent-application``, DTD v4.x): one document with
  title, abstract and claims (the description too with ``include_description``). The DOCTYPE
  points at a DTD that is not shipped; the parser never fetches it. Cited references
  (``references-cited`` or ``us-references-cited``) go to metadata: ``cited_patents`` (ids,
  space-separated, since index metadata must be flat), ``cited_other`` (how many non-patent
  references) and ``cited_by_examiner``.

The text opens with a header line carrying number, date and title, as a printed patent does, so
the number and the title can be answers that a document contains.
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import date
from pathlib import Path

from sleuth.corpus.files import ReadOptions, folder_files
from sleuth.corpus.models import Document
from sleuth.errors import InputError

CSV_COLUMNS = ("patent_number", "patent_date", "patent_title", "patent_abstract")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ROOTS = {"us-patent-grant", "us-patent-application"}


def read_patents(
    path: str | Path, include_description: bool = False, options: ReadOptions | None = None
) -> Iterator[Document]:
    """Every patent under ``path``: a ``.csv`` file, an ``.xml`` file, or a folder of them."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", source=str(path))
    if path.is_file():
        files = [path]
    else:
        files = [p for p in folder_files(path, options or ReadOptions()) if _is_patent_file(p)]
    for file in files:
        if file.suffix.lower() == ".csv":
            yield from read_patents_csv(file)
        elif file.suffix.lower() == ".xml":
            yield read_patent_xml(file, include_description)
        else:
            raise InputError("not a patent file (expected .csv or .xml)", source=str(file))


def patent_id(number: str) -> str:
    """``US`` + the number without country prefix, separators and leading zeros.

    ``06859910`` → ``US6859910``; ``US2007/0140112`` → ``US20070140112``.
    """
    digits = re.sub(r"^US", "", re.sub(r"[^0-9A-Z]", "", number.upper())).lstrip("0")
    return f"US{digits}"


# --- PatentsView CSV -----------------------------------------------------------------------


def read_patents_csv(path: str | Path) -> Iterator[Document]:
    """One document per row; a row with a missing field is an ``InputError`` naming its line."""
    path = Path(path)
    text = _read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"missing CSV columns: {', '.join(missing)}", source=str(path))
    for row in reader:
        yield _csv_document(row, path, reader.line_num)


def _csv_document(row: dict[str, str], path: Path, line: int) -> Document:
    values = {c: _unwrap(row.get(c) or "") for c in CSV_COLUMNS}
    record = f"line {line} ({values['patent_number'] or 'no number'})"
    for column in CSV_COLUMNS:
        if not values[column]:
            raise InputError(f"empty {column}", source=str(path), record=record)
    if not _DATE.match(values["patent_date"]):
        raise InputError(
            f"bad patent_date {values['patent_date']!r}", source=str(path), record=record
        )
    doc_id = patent_id(values["patent_number"])
    metadata = {
        "number": doc_id,
        "date": _day(values["patent_date"]),
        "source": path.name,
        "domain": "patents",
    }
    text = f"{_header(doc_id, values['patent_date'], values['patent_title'])}\n\n"
    text += f"Abstract: {values['patent_abstract']}"
    return Document(id=doc_id, text=text, title=values["patent_title"], metadata=metadata)


def _day(iso: str) -> date | None:
    """A ``YYYY-MM-DD`` date as a ``date`` (None when it is not a real day)."""
    try:
        return date.fromisoformat(iso)
    except ValueError:
        return None


def _unwrap(value: str) -> str:
    """Strip a field's extra quoting layer (``" text ""quoted"" "`` → ``text "quoted"``)."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('""', '"')
    return " ".join(value.split())


# --- USPTO full-text XML -------------------------------------------------------------------


def read_patent_xml(path: str | Path, include_description: bool = False) -> Document:
    """One USPTO grant or application (see the module docstring)."""
    path = Path(path)
    root = _parse_xml(path)
    number = root.findtext("./*/publication-reference/document-id/doc-number")
    date = root.findtext("./*/publication-reference/document-id/date") or ""
    if not number:
        raise InputError("no publication number", source=str(path))
    doc_id = patent_id(number)
    title = _text(root.find("./*/invention-title"))
    abstract = _text(root.find("./abstract"))
    claims = [_text(c) for c in root.iterfind("./claims/claim")]
    if not (abstract or claims):
        raise InputError("neither abstract nor claims", source=str(path), record=doc_id)
    iso_date = f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) == 8 else ""
    parts = [_header(doc_id, iso_date, title), f"Abstract: {abstract}", "Claims:", *claims]
    if include_description:
        parts += ["Description:", _text(root.find("./description"))]
    metadata = {
        "number": doc_id,
        "date": _day(iso_date) if iso_date else None,
        "kind": root.findtext("./*/publication-reference/document-id/kind") or "",
        "application_number": root.findtext("./*/application-reference/document-id/doc-number")
        or "",
        "source": path.name,
        "domain": "patents",
        **_citations(root),
    }
    return Document(id=doc_id, text="\n\n".join(parts), title=title or doc_id, metadata=metadata)


def _parse_xml(path: Path) -> ET.Element:
    data = _read_text(path)
    # The DOCTYPE names a DTD that is not shipped; drop it so no parser ever tries to load it.
    data = re.sub(r"<!DOCTYPE[^>\[]*(\[[^\]]*\])?\s*>", "", data, count=1)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise InputError(f"invalid patent XML: {e}", source=str(path)) from None
    if root.tag not in _ROOTS:
        raise InputError(f"not a USPTO patent document (root <{root.tag}>)", source=str(path))
    return root


def _citations(root: ET.Element) -> dict[str, str | int]:
    cited: list[str] = []
    other = by_examiner = 0
    for citation in _citation_elements(root):
        number = citation.findtext("./patcit/document-id/doc-number")
        country = citation.findtext("./patcit/document-id/country") or ""
        if number and country == "US":
            cited.append(patent_id(number))
        else:
            other += 1
        by_examiner += "examiner" in (citation.findtext("./category") or "")
    return {
        "cited_patents": " ".join(dict.fromkeys(cited)),
        "cited_other": other,
        "cited_by_examiner": by_examiner,
    }


def _citation_elements(root: ET.Element) -> list[ET.Element]:
    """``citation`` (DTD v4.0-4.2) or ``us-citation`` (v4.5) entries of the references cited."""
    biblio = root.find("./*[publication-reference]")
    if biblio is None:
        return []
    found = biblio.findall("./references-cited/citation")
    return found + biblio.findall("./us-references-cited/us-citation")


def _header(doc_id: str, date: str, title: str) -> str:
    return f"Patent {doc_id}" + (f" ({date})" if date else "") + (f": {title}" if title else "")


def _text(element: ET.Element | None) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read patent file: {e}", source=str(path)) from None


def _is_patent_file(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in {".csv", ".xml"}
