"""Code and tests say why in their own words: no references to tracker issues, which a reader
of the repository cannot follow."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACKER = re.compile(r"\b[Ii]ssue\s*#?\d+|#\s*--\s*items?\s+\d+")


def test_no_tracker_references_in_code_or_tests():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("src", "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if TRACKER.search(line)
    ]
    assert not found, f"tracker references: {found[:20]}"
