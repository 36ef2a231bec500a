"""Read documents from JSONL files, folders of text/Markdown/HTML, and email.

Every reader yields :class:`Document` records and raises :class:`InputError` naming the
file (and record) for bad input, so ``sleuth ingest`` can stop before writing anything.
Inside a folder or zip, files that are only guessed to be email by their name (``LICENSE``
beside a maildir) and files of unknown types are skipped and reported instead.

Untrusted input stays bounded: a zip is checked against :class:`ArchiveLimits` before any
member is read, and a folder walk does not leave the folder through symbolic links unless
asked to (``--follow-links``).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from sleuth.corpus.email import is_mbox_bytes, iter_mbox_bytes, parse_message
from sleuth.corpus.files import ReadOptions, folder_files
from sleuth.corpus.html import html_to_text
from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.io import JsonLineError, json_lines

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst"}
HTML_SUFFIXES = {".html", ".htm"}
EMAIL_SUFFIXES = {".eml"}
_ISO_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
MBOX_SUFFIXES = {".mbox"}


LEGACY_ENCODING = "cp1252"
"""What a text or HTML file that is not UTF-8 (and declares nothing) is read as: windows-1252,
the usual encoding of older Western text, which web browsers also assume for undeclared
pages. Detectors guess worse on such short texts (charset-normalizer reads "naïve" as "naďve")."""

_BOMS = (  # longest first: a UTF-32 LE mark starts like UTF-16 LE's
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_CONTROL = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")  # never in text, often in binary data
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


def _decode(data: bytes, source: str, recoded: list[str] | None = None) -> str:
    """UTF-8 (a BOM dropped). With ``recoded`` (a text or HTML file: JSONL must be UTF-8) also
    UTF-16/32 with a BOM, the charset an HTML page declares, or :data:`LEGACY_ENCODING`; each
    such file is noted in ``recoded``. Binary data stays an error."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        problem = f"not valid UTF-8 (byte {e.start}): {e.reason}"
    if recoded is None:
        raise InputError(problem, source=source)
    for encoding in _fallbacks(data):
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        recoded.append(f"{source} ({encoding})")
        return text
    raise InputError(f"{problem}, nor text in another encoding", source=source)


def _fallbacks(data: bytes) -> list[str]:
    """Encodings to try, in order, for bytes that are not UTF-8 (none for binary data)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return [encoding]
    if len(_CONTROL.findall(data)) > len(data) // 1000:
        return []
    declared = _META_CHARSET.search(data[:4096])
    return ([declared.group(1).decode("ascii")] if declared else []) + [LEGACY_ENCODING]


def _require_text(doc: Document, source: str) -> Document:
    if not doc.text.strip():
        raise InputError("empty text", source=source, record=doc.id)
    return doc


def read_documents_jsonl(path: Path) -> Iterator[Document]:
    """One document per line: ``{"id", "text", "title"?, "metadata"?}``."""
    source = str(path)
    text = _decode(_read_bytes(path), source)
    lines = json_lines(text)
    while True:
        try:
            n, obj = next(lines)
        except StopIteration:
            return
        except JsonLineError as e:
            what = e.msg if e.msg.startswith("JSON nested") else f"invalid JSON: {e.msg}"
            raise InputError(what, source=source, record=f"line {e.lineno}") from None
        yield document_from_record(obj, source, f"line {n}")


def document_from_record(obj: object, source: str, where: str) -> Document:
    """One ``{"id", "text", "title"?, "metadata"?}`` record (a JSONL line, or a dict given to
    the Python API) as a :class:`Document`; ``where`` names it in the error."""
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", source=source, record=where)
    doc_id = obj.get("id")
    if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
        raise InputError("missing 'id'", source=source, record=where)
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        raise InputError(
            f"'id' must be a string or an integer, not {type(doc_id).__name__}",
            source=source,
            record=where,
        )
    where = f"{where} ({doc_id})"
    if not isinstance(obj.get("text"), str):
        raise InputError("missing or non-string 'text'", source=source, record=where)
    title = obj.get("title")
    if title is not None and not isinstance(title, str):
        raise InputError(
            f"'title' must be a string, not {type(title).__name__}", source=source, record=where
        )
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InputError("'metadata' must be an object", source=source, record=where)
    metadata = {k: _typed(v) for k, v in metadata.items()}
    doc = Document(id=str(doc_id), text=obj["text"], title=title, metadata=metadata)
    return _require_text(doc, f"{source} {where}")


def _typed(value: Any) -> Any:
    """A JSON metadata value, with an ISO date (``2001-05-04``, ``2001-05-04T17:01:00Z``) read as
    a date, so it is stored as one and can be filtered by range."""
    if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
        return value
    try:
        if len(value) == 10:
            return date.fromisoformat(value)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", source=str(path)) from None


def _looks_like_email_name(name: str) -> bool:
    """CMU maildir files have no suffix or end in a dot (``inbox/12.``); Maildir keeps cur/new."""
    parts = name.split("/")
    base = parts[-1]
    in_maildir = len(parts) > 1 and parts[-2] in {"cur", "new"}
    return in_maildir or base.endswith(".") or "." not in base


def _document_from_file(
    rel: str,
    data: bytes,
    source: str,
    recoded: list[str],
    skipped: list[str] | None = None,
) -> Iterator[Document]:
    """Dispatch one file (on disk or in a zip) to its reader by name and content.

    With ``skipped`` (a folder or zip member), a file of unknown type or one whose name only
    suggested an email is noted there instead of failing the whole read. A text or HTML file
    that is not UTF-8 is noted in ``recoded`` (:func:`_decode`)."""
    suffix = Path(rel).suffix.lower()
    if suffix in TEXT_SUFFIXES:
        text = _decode(data, source, recoded)
        yield _require_text(
            Document(id=rel, text=text, title=Path(rel).stem, metadata={"path": rel}), source
        )
    elif suffix in HTML_SUFFIXES:
        title, text = html_to_text(_decode(data, source, recoded))
        doc = Document(id=rel, text=text, title=title or Path(rel).stem, metadata={"path": rel})
        yield _require_text(doc, source)
    elif suffix in MBOX_SUFFIXES or is_mbox_bytes(data):
        yield from iter_mbox_bytes(data, source)
    elif suffix in EMAIL_SUFFIXES or skipped is None:
        yield parse_message(data, source, fallback_id=rel)
    elif not _looks_like_email_name(rel):
        skipped.append(f"{source}: unsupported file type")
    else:
        try:
            yield parse_message(data, source, fallback_id=rel)
        except InputError as e:
            skipped.append(str(e))


def _walk_folder(root: Path, options: ReadOptions) -> Iterator[Document]:
    for p in folder_files(root, options):
        rel = p.relative_to(root).as_posix()
        if p.suffix.lower() == ".jsonl":
            read: Callable[[], Iterator[Document]] = partial(read_documents_jsonl, p)
        elif p.suffix.lower() == ".zip":
            read = partial(read_zip, p, options)
        else:
            read = partial(_file_documents, p, rel, options)
        yield from _unless_unreadable(read, options)


def _file_documents(p: Path, rel: str, options: ReadOptions) -> Iterator[Document]:
    data = _read_bytes(p)
    yield from _document_from_file(rel, data, str(p), options.recoded, options.skipped)


def _unless_unreadable(
    read: Callable[[], Iterator[Document]], options: ReadOptions
) -> Iterator[Document]:
    """One file's documents (read whole first); with ``options.skip_unreadable`` a file that
    cannot be read is listed in ``options.skipped`` and gives none."""
    try:
        docs = list(read())
    except _Unreadable:
        raise
    except InputError as e:
        if not options.skip_unreadable:
            raise _Unreadable(f"{e} (--skip-unreadable leaves such files out)") from None
        options.skipped.append(str(e))
        return
    yield from docs


class _Unreadable(InputError):
    """A file in a folder or zip could not be read (the hint to skip such files added once)."""


def read_zip(path: Path, options: ReadOptions | None = None) -> Iterator[Document]:
    """Every supported file inside a zip (text, HTML, .eml, mbox, maildir messages).

    The members' declared sizes are checked against ``options.archive`` before any is read;
    ``zipfile`` never inflates a member past its declared size (a lie fails the CRC check)."""
    options = options or ReadOptions()
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise InputError(f"not a readable zip: {e}", source=str(path)) from None
    with zf:
        members = [
            i
            for i in zf.infolist()
            if not i.is_dir() and not i.filename.rsplit("/", 1)[-1].startswith(".")
        ]
        options.archive.check(members, str(path))
        for info in sorted(members, key=lambda i: i.filename):
            read = partial(_member_documents, zf, info, f"{path}:{info.filename}", options)
            yield from _unless_unreadable(read, options)


def _member_documents(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, source: str, options: ReadOptions
) -> Iterator[Document]:
    try:
        data = zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
        raise InputError(f"corrupt zip entry: {e}", source=source) from None
    yield from _document_from_file(info.filename, data, source, options.recoded, options.skipped)


def read_path(path: str | Path, options: ReadOptions | None = None) -> Iterator[Document]:
    """Read one path: a JSONL file, a zip, an mbox/.eml/text/HTML file, or a folder of them."""
    p, options = Path(path), options or ReadOptions()
    if not p.exists():
        raise InputError("no such file or folder", source=str(p))
    if p.is_dir():
        yield from _walk_folder(p, options)
    elif p.suffix.lower() == ".jsonl":
        yield from read_documents_jsonl(p)
    elif p.suffix.lower() == ".zip":
        yield from read_zip(p, options)
    else:
        docs = list(_document_from_file(p.name, _read_bytes(p), str(p), options.recoded))
        if not docs:
            raise InputError(f"unsupported file type {p.suffix!r}", source=str(p))
        yield from docs


def _reader(fmt: str) -> Callable[..., Iterator[Document]]:
    if fmt == "auto":
        return read_path
    if fmt == "sec":
        from sleuth.corpus.sec import read_sec

        return read_sec
    if fmt == "patents":
        from sleuth.corpus.patents import read_patents

        return read_patents
    raise InputError(f"unknown format {fmt!r}; use auto, sec or patents")


def read_documents(
    paths: Iterable[str | Path], fmt: str = "auto", options: ReadOptions | None = None
) -> list[Document]:
    """Read every path fully and reject duplicate ids, before anything is indexed.

    ``fmt``: ``auto`` (by file type), ``sec`` (EDGAR filings, HTML/Markdown) or ``patents``
    (PatentsView CSV, USPTO full-text XML). What was skipped is left in ``options.skipped``."""
    reader, options = _reader(fmt), options or ReadOptions()
    seen: dict[str, str] = {}
    docs: list[Document] = []
    for path in paths:
        for doc in reader(path, options=options):
            if doc.id in seen:
                raise InputError(
                    f"duplicate document id (first seen in {seen[doc.id]})",
                    source=str(path),
                    record=doc.id,
                )
            seen[doc.id] = str(path)
            docs.append(doc)
    if not docs:
        raise InputError("no documents found", source=", ".join(str(p) for p in paths))
    return docs
