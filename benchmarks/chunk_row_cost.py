"""Why the index holds its chunks as ``ChunkRow`` and not as ``corpus.models.Chunk``.

The lexical side keeps every chunk of the corpus in memory and builds one row per chunk when an
index opens. This builds the same rows both ways from JSON lines and reports time and memory.

    python benchmarks/chunk_row_cost.py --rows 112265
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable

from sleuth.corpus.models import Chunk
from sleuth.index.lexical import ChunkRow


def _lines(n: int) -> list[str]:
    return [
        json.dumps(
            {"id": f"d{i}_0", "doc_id": f"d{i}", "idx": 0, "text": "x" * 40, "tokens": 12}
            | {"title": f"T{i}"}
        )
        for i in range(n)
    ]


def _rows(lines: list[str]) -> list[ChunkRow]:
    return [ChunkRow(**json.loads(line)) for line in lines]


def _chunks(lines: list[str]) -> list[Chunk]:
    out = []
    for line in lines:
        fields = json.loads(line)
        fields.pop("title")  # Chunk has no title; metadata is its own dict
        out.append(Chunk(**fields))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=112_265)
    args = parser.parse_args()
    lines = _lines(args.rows)
    build: dict[str, Callable[[list[str]], list]] = {"ChunkRow": _rows, "Chunk": _chunks}
    for name, make in build.items():
        start = time.perf_counter()
        make(lines)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        kept = make(lines)
        traced, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{name}: {len(kept)} rows in {seconds:.2f} s, {traced / len(kept):.0f} B/row")


if __name__ == "__main__":
    main()
