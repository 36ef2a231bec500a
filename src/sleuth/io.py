"""Small file helpers: atomic writes and crash-safe JSONL appends of untrusted text.

Text from a model or a corpus may hold lone surrogates (``"\\ud800"``), which UTF-8 cannot
encode: every writer here replaces them with U+FFFD, so writing a record never fails on its text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` so readers see the old file or the new one, never half of it."""
    text = safe_text(text)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append one JSON line and fsync, so a crash loses at most the line being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json_text(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the complete JSON lines of a file; a torn last line (a crash mid-write) is skipped."""
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 and not line.endswith("\n"):
                return
            raise
