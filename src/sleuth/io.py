"""Small file helpers: atomic writes, crash-safe JSONL appends of untrusted text, and
one-writer folder locks.

Text from a model or a corpus may hold lone surrogates (``"\\ud800"``), which UTF-8 cannot
encode: every writer here replaces them with U+FFFD, so writing a record never fails on its text.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sleuth.errors import BusyError, InputError

LOCK_FILE = ".sleuth.lock"


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it encodes as UTF-8.

    A surrogate pair split over two code units (``"\\ud83d\\ude00"``) is joined, not replaced.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def json_text(record: Any) -> str:
    """One line of JSON (non-ASCII kept as is) that always encodes as UTF-8."""
    return safe_text(json.dumps(record, ensure_ascii=False))


def sha256_file(path: str | Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (weights files run to hundreds of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write_bytes(path: str | Path, data: bytes, *, make_parent: bool = True) -> None:
    """Write ``data`` so readers see the old file or the new one, never half of it.

    The temporary file is named per process and thread, so concurrent writers of one path
    never share it: the last ``os.replace`` wins whole. ``make_parent=False``: a missing folder
    raises FileNotFoundError instead (a cache must not bring back a folder another process
    removed).
    """
    path = Path(path)
    if make_parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: str | Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` as UTF-8 (lone surrogates as U+FFFD)."""
    atomic_write_bytes(path, safe_text(text).encode("utf-8"))


def append_jsonl(path: str | Path, record: dict[str, Any], *, sync: bool = True) -> None:
    """Append one JSON line and fsync, so a crash loses at most the line being written.

    ``sync=False`` leaves the fsync to a later line (a trajectory's end): the line is written
    and flushed, so it survives the process crashing, though not the machine losing power."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json_text(record) + "\n")
        f.flush()
        if sync:
            os.fsync(f.fileno())


class JsonLineError(json.JSONDecodeError):
    """A line of a JSONL text that is not JSON; ``lineno`` is its line in the whole text."""

    def __init__(self, msg: str, line: str, pos: int, lineno: int):
        super().__init__(msg, line, pos)
        self.lineno = lineno


def json_lines(text: str, *, torn_tail_ok: bool = False) -> Iterator[tuple[int, Any]]:
    """The one JSONL reader: ``(line number, value)`` for every non-blank line of ``text``.

    Raises :class:`JsonLineError` on a line that is not JSON (or nests too deeply); with
    ``torn_tail_ok`` a bad last line without its newline (a crash mid-append) ends the text
    instead. Callers turn the error into their own message (an ``InputError`` for user files).
    """
    # Lines end at \n, \r\n or \r (as a file opened in text mode reads them), never at the other
    # separators str.splitlines knows: a JSON string may hold U+2028 unescaped.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    complete = lines[-1] == ""  # the text ends with a newline
    if complete:
        lines.pop()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            if torn_tail_ok and n == len(lines) and not complete:
                return
            raise JsonLineError(exc.msg, line, exc.pos, n) from None
        except RecursionError:
            raise JsonLineError("JSON nested too deeply", line, 0, n) from None
        yield n, value


def read_jsonl(path: str | Path, fix: str = "") -> Iterator[dict[str, Any]]:
    """Yield the complete JSON objects of a file; a torn last line (a crash mid-write) is skipped.

    The one reader of the records sleuth wrote (trajectories, eval results, run logs): a missing
    or unreadable file, text that is not UTF-8 and a line that is not a JSON object are each an
    :class:`InputError` naming the file and the line, ending with ``fix`` (how to recover).
    """
    source, hint = str(path), f"; {fix}" if fix else ""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start}){hint}", source=source) from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", source=source) from None
    lines = json_lines(text, torn_tail_ok=True)
    while True:
        try:
            n, value = next(lines)
        except StopIteration:
            return
        except JsonLineError as e:
            raise InputError(
                f"line {e.lineno} is not JSON ({e.msg}){hint}", source=source
            ) from None
        if not isinstance(value, dict):
            raise InputError(f"line {n} is not a JSON object{hint}", source=source)
        yield value


def read_json(path: str | Path, fix: str = "") -> Any:
    """The JSON value of a file sleuth wrote (a cache entry, a ledger, a checkpoint's state);
    a missing, non-UTF-8 or non-JSON file is one :class:`InputError` naming it, then ``fix``."""
    hint = f"; {fix}" if fix else ""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", source=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InputError(f"not a JSON file sleuth wrote ({e}){hint}", source=str(path)) from None


@contextmanager
def folder_lock(folder: str | Path, what: str) -> Iterator[None]:
    """Hold the one-writer lock of ``folder`` (created if missing) until the block ends.

    An ``fcntl.flock`` on ``folder/.sleuth.lock``: the OS drops it when the process dies, so a
    crash never leaves a stale lock. A second writer is refused at once (BusyError) instead of
    mixing its writes with the first one's; ``what`` names the folder in that message.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise InputError(f"cannot write {what}: {e.strerror}", source=str(folder)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise BusyError(
                f"{folder}: another sleuth process (pid {holder}) is writing {what}; "
                "wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def lock_holder(folder: str | Path) -> str | None:
    """The pid of the process holding ``folder``'s lock, or None when no one holds it."""
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    finally:
        os.close(fd)
    return None


def check_file_target(path: str | Path, option: str) -> None:
    """A file the command will write: refuse a folder, or a parent that is a file."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{option} is a folder; give a file path", source=str(path))
    _check_parents(path, option)


def check_folder_target(path: str | Path, option: str) -> None:
    """A folder the command will write into: refuse a file, or a parent that is a file."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} is a file; give a folder", source=str(path))
    _check_parents(path / "x", option, path)  # a folder that exists must take new files


def _check_parents(path: Path, option: str, named: Path | None = None) -> None:
    """The nearest existing folder above ``path`` must be a folder we can create files in
    (probed with a file made and removed at once: permissions, read-only mounts and ``/proc``
    all refuse it, where ``os.access`` would say yes to root)."""
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{option} is under a file ({parent})", source=str(named or path))
            try:
                fd, probe = tempfile.mkstemp(prefix=".sleuth-probe-", dir=parent)
            except OSError as e:
                raise InputError(
                    f"{option}: cannot create files in {parent} ({e.strerror}); choose another path",
                    source=str(named or path),
                ) from None
            os.close(fd)
            os.unlink(probe)
            return
