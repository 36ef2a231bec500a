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

import json
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from sleuth.corpus.email import is_mbox_bytes, iter_mbox_bytes, parse_message
from sleuth.corpus.html import html_to_text
from sleuth.corpus.models import Document
from sleuth.errors import InputError

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst"}
HTML_SUFFIXES = {".html", ".htm"}
EMAIL_SUFFIXES = {".eml"}
MBOX_SUFFIXES = {".mbox"}
RATIO_FLOOR = 1 << 20  # members smaller than this are never called bombs, whatever their ratio
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def _size(n: float) -> str:
    """Bytes in binary units, e.g. ``64.0 MiB``."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GiB"


@dataclass(frozen=True)
class ArchiveLimits:
    """How much one zip may expand to: per member, in all, by compression ratio, in count."""

    entry: int = 64 << 20
    total: int = 1 << 30
    ratio: float = 100.0
    entries: int = 100_000

    @classmethod
    def parse(cls, spec: str) -> ArchiveLimits:
        """``entry=256MiB,total=4GiB,ratio=500,entries=200000``; keys left out keep defaults."""
        limits, names = cls(), {f.name for f in fields(cls)}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            key, _, value = part.partition("=")
            key = key.strip()
            m = _SIZE.match(value)
            if key not in names or not m:
                raise InputError(
                    f"bad --archive-limits item {part!r}; use {', '.join(sorted(names))}=N "
                    "(sizes may end in KiB, MiB, GiB)"
                )
            number = float(m.group(1)) * _UNITS[m.group(2).lower()]
            limits = replace(limits, **{key: number if key == "ratio" else int(number)})
        return limits

    def check(self, members: list[zipfile.ZipInfo], source: str) -> None:
        """Raise before anything is read when the declared sizes break a limit."""

        def over(what: str, key: str, value: str) -> InputError:
            return InputError(
                f"{what}; raise it with --archive-limits {key}={value}", source=source
            )

        if len(members) > self.entries:
            raise over(f"{len(members)} files, over the limit of {self.entries}", "entries", "N")
        for info in members:
            size, packed = info.file_size, max(info.compress_size, 1)
            if size > self.entry:
                raise over(
                    f"{info.filename} is {_size(size)} uncompressed, over the "
                    f"{_size(self.entry)} limit for one file",
                    "entry",
                    "SIZE",
                )
            if size > RATIO_FLOOR and size > self.ratio * packed:
                raise over(
                    f"{info.filename} expands {size / packed:.0f}:1, over the "
                    f"{self.ratio:g}:1 limit (a zip bomb?)",
                    "ratio",
                    "N",
                )
        total = sum(i.file_size for i in members)
        if total > self.total:
            raise over(
                f"{_size(total)} uncompressed in all, over the {_size(self.total)} limit",
                "total",
                "SIZE",
            )


@dataclass
class ReadOptions:
    """How untrusted input is read, and what was skipped (one line each, for the report)."""

    follow_links: bool = False
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    skipped: list[str] = field(default_factory=list)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 (byte {e.start}): {e.reason}", source=source) from None


def _require_text(doc: Document, source: str) -> Document:
    if not doc.text.strip():
        raise InputError("empty text", source=source, record=doc.id)
    return doc


def read_jsonl(path: Path) -> Iterator[Document]:
    """One document per line: ``{"id", "text", "title"?, "metadata"?}``."""
    source = str(path)
    text = _decode(_read_bytes(path), source)
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"invalid JSON: {e.msg}", source=source, record=where) from None
        except RecursionError:
            raise InputError("JSON nested too deeply", source=source, record=where) from None
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", source=source, record=where)
        doc_id = obj.get("id")
        if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
            raise InputError("missing 'id'", source=source, record=where)
        if not isinstance(obj.get("text"), str):
            raise InputError(
                "missing or non-string 'text'", source=source, record=f"{where} ({doc_id})"
            )
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InputError("'metadata' must be an object", source=source, record=where)
        doc = Document(id=str(doc_id), text=obj["text"], title=obj.get("title"), metadata=metadata)
        yield _require_text(doc, f"{source} {where}")


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
    rel: str, data: bytes, source: str, skipped: list[str] | None = None
) -> Iterator[Document]:
    """Dispatch one file (on disk or in a zip) to its reader by name and content.

    With ``skipped`` (a folder or zip member), a file of unknown type or one whose name only
    suggested an email is noted there instead of failing the whole read."""
    suffix = Path(rel).suffix.lower()
    if suffix in TEXT_SUFFIXES:
        text = _decode(data, source)
        yield _require_text(
            Document(id=rel, text=text, title=Path(rel).stem, metadata={"path": rel}), source
        )
    elif suffix in HTML_SUFFIXES:
        title, text = html_to_text(_decode(data, source))
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


def folder_files(root: Path, options: ReadOptions) -> list[Path]:
    """Files under ``root``, sorted, hidden files and folders left out.

    A linked file whose target is outside ``root`` and any linked folder are skipped (and
    reported) unless ``options.follow_links``; then each real folder is entered once, so a
    link cycle ends."""
    real_root, visited, files = root.resolve(), set(), []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=options.follow_links):
        here = Path(dirpath)
        real = here.resolve()
        if real in visited:
            dirnames[:] = []
            continue
        visited.add(real)
        kept = []
        for name in sorted(dirnames):
            if name.startswith("."):
                continue
            if (here / name).is_symlink() and not options.follow_links:
                options.skipped.append(f"{here / name}: linked folder (use --follow-links)")
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            p = here / name
            if name.startswith(".") or not p.is_file():
                continue
            outside = p.is_symlink() and not p.resolve().is_relative_to(real_root)
            if outside and not options.follow_links:
                options.skipped.append(f"{p}: links outside the folder (use --follow-links)")
                continue
            files.append(p)
    return sorted(files)


def _walk_folder(root: Path, options: ReadOptions) -> Iterator[Document]:
    for p in folder_files(root, options):
        rel = p.relative_to(root).as_posix()
        if p.suffix.lower() == ".jsonl":
            yield from read_jsonl(p)
        elif p.suffix.lower() == ".zip":
            yield from read_zip(p, options)
        else:
            yield from _document_from_file(rel, _read_bytes(p), str(p), options.skipped)


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
            source = f"{path}:{info.filename}"
            try:
                data = zf.read(info)
            except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
                raise InputError(f"corrupt zip entry: {e}", source=source) from None
            yield from _document_from_file(info.filename, data, source, options.skipped)


def read_path(path: str | Path, options: ReadOptions | None = None) -> Iterator[Document]:
    """Read one path: a JSONL file, a zip, an mbox/.eml/text/HTML file, or a folder of them."""
    p, options = Path(path), options or ReadOptions()
    if not p.exists():
        raise InputError("no such file or folder", source=str(p))
    if p.is_dir():
        yield from _walk_folder(p, options)
    elif p.suffix.lower() == ".jsonl":
        yield from read_jsonl(p)
    elif p.suffix.lower() == ".zip":
        yield from read_zip(p, options)
    else:
        docs = list(_document_from_file(p.name, _read_bytes(p), str(p)))
        if not docs:
            raise InputError(f"unsupported file type {p.suffix!r}", source=str(p))
        yield from docs


def _reader(fmt: str):
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
