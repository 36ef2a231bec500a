"""Finding untrusted files and bounding what they expand to: folder walks and zip limits.

A zip is checked against :class:`ArchiveLimits` before any member is read, and a folder walk
(:func:`folder_files`) does not leave the folder through symbolic links unless asked to
(``--follow-links``). :class:`ReadOptions` carries both, and collects what was skipped.
"""

from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sleuth.errors import InputError

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
            change: dict[str, Any] = {key: number if key == "ratio" else int(number)}
            limits = replace(limits, **change)
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
    """How untrusted input is read, and what was skipped or decoded other than as UTF-8 (one line
    each, for the report).

    ``skip_unreadable``: a file inside a folder or zip that cannot be read (not text, corrupt, a
    bad JSONL line) is left out and listed in ``skipped`` instead of stopping the whole read."""

    follow_links: bool = False
    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    skip_unreadable: bool = False
    skipped: list[str] = field(default_factory=list)
    recoded: list[str] = field(default_factory=list)


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
