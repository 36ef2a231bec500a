"""grep at scale for ``search_bench.py --grep-only``: grep_corpus (word-index prefilter, then the
regex) against the previous full scan, on synthetic rows of real text."""

from __future__ import annotations

import random
import re
import time
from collections import Counter

import numpy as np
import regex
from rich.console import Console
from rich.table import Table

from sleuth.index.grepindex import GrepIndex
from sleuth.index.lexical import ChunkRow, LexicalIndex
from sleuth.tools.grep import GrepError, grep

console = Console(width=120)


def pct(values: list[float], q: float) -> float:
    """The q-th percentile in milliseconds."""
    return float(np.percentile(values, q)) * 1000


def naive_grep(rows: list[ChunkRow], pattern: str, max_matches: int = 5) -> list[ChunkRow]:
    """The previous grep_corpus loop: the regex over every chunk in corpus order, each search
    under the remaining time (here never reached, so every call runs to its answer)."""
    compiled, found, deadline = regex.compile(pattern), [], time.perf_counter() + 3600
    for row in rows:
        if compiled.search(row.text, timeout=deadline - time.perf_counter()):
            found.append(row)
            if len(found) >= max_matches:
                break
    return found


def grep_patterns(base: list[str], k: int, seed: int = 0) -> dict[str, list[str]]:
    """Patterns by kind, drawn from the corpus vocabulary (absent ones are checked absent)."""
    rng = random.Random(seed)
    df = Counter(w for t in base for w in set(re.findall(r"[A-Za-z]{5,}", t)))
    rare = sorted(w for w, n in df.items() if n == 1)
    common = sorted(w for w, n in df.items() if n > len(base) // 200)
    joined = "\n".join(base).lower()
    absent = []
    while len(absent) < k:
        w = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(6, 9)))
        if w not in joined:
            absent.append(w)
    pairs = [re.findall(r"[A-Z][a-z]{3,} [A-Z][a-z]{3,}", t) for t in rng.sample(base, 400)]
    phrases = sorted({p for ps in pairs for p in ps})
    return {
        "rare word": [rf"\b{w}\b" for w in rng.sample(rare, k)],
        "common word": [rf"\b{w}\b" for w in rng.sample(common, k)],
        "absent term": absent,
        "(?i) phrase": [f"(?i){re.escape(p)}" for p in rng.sample(phrases, k)],
        "inside words": [w[1:-1] for w in rng.sample(rare, k)],
        "no literal": [r"\d{4}-\d{2}-\d{2}", r"[A-Z]{2}\d{3}", r"\$\d+\.\d\d"][:k],
    }


def grep_at_scale(base: list[str], n_chunks: int, k: int) -> None:
    """grep_corpus vs the previous full scan on ``n_chunks`` synthetic rows of real text."""
    rows = [
        ChunkRow(f"c{i}_0", f"c{i}", 0, f"{base[i % len(base)]} ref{i}x", 1)
        for i in range(n_chunks)
    ]
    t0 = time.perf_counter()
    gi = GrepIndex.build([r.text for r in rows])
    build_s = time.perf_counter() - t0
    lexical = LexicalIndex(rows=rows, stamp={}, grep_index=gi)
    console.print(
        f"grep index over {n_chunks:,} chunks: built in {build_s:.0f} s, "
        f"{len(gi.starts):,} tokens, {gi.postings.nbytes / 2**20:.0f} MiB of postings"
    )
    table = Table(title=f"grep at {n_chunks:,} chunks (ms)")
    cols = (
        "patterns",
        "n",
        "errors",
        "grep p50",
        "grep p95",
        "old p50",
        "old p95",
        "p50 ×",
        "p95 ×",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "patterns" else "right")
    for kind, patterns in grep_patterns(base, k).items():
        new_t, old_t, errors = [], [], 0
        for p in patterns:
            t0 = time.perf_counter()
            try:
                got = [r.id for r in grep(lexical, p)]
            except GrepError:
                got, errors = None, errors + 1
            new_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            want = [r.id for r in naive_grep(rows, p)]
            old_t.append(time.perf_counter() - t0)
            assert got is None or got == want, (p, got, want)
        table.add_row(
            kind,
            str(len(patterns)),
            str(errors),
            *(f"{pct(v, q):.1f}" for v in (new_t, old_t) for q in (50, 95)),
            f"{pct(old_t, 50) / pct(new_t, 50):.0f}",
            f"{pct(old_t, 95) / pct(new_t, 95):.0f}",
        )
    console.print(table)
