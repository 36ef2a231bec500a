"""Where an ingest's time goes, stage by stage, with the cheap ``hash:384`` vectors (why the
1M-chunk index takes hours to build here).

Each stage runs alone on the same ``--n`` scale-corpus paragraphs (``_scale_corpus.py``) and
reports CPU milliseconds a chunk (``time.process_time``, all threads): on a shared machine wall
time mostly measures the other jobs. Chroma's writes are timed in fresh collections, by batch
size (``INGEST_BATCH`` and Chroma's maximum) and as ``add`` against ``upsert``; then by position
in a growing collection (does a write cost more as the index grows?). Last, whether a write
holds the GIL: a Python thread counts while Chroma writes, against its count while idle.

    nice -n 15 python benchmarks/ingest_stages.py --n 20000 --grow 60000
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale_corpus import corpus  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "ingest_stages.json"


def cpu_ms(fn: Callable[[], Any], n: int) -> tuple[Any, dict[str, float]]:
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    return out, {"cpu_ms_per_chunk": round(cpu / n * 1e3, 3), "wall_s": round(wall, 1)}


def writer(collection: Any, chunks: list, vectors: np.ndarray, batch: int, add: bool) -> Callable:
    """Chroma writes of ``chunks`` as ``Index._write`` makes them (text, metadata, hash)."""
    from sleuth.index.update import chunk_sha

    write = collection.add if add else collection.upsert

    def run() -> None:
        for i in range(0, len(chunks), batch):
            part = chunks[i : i + batch]
            write(
                ids=[c.id for c in part],
                embeddings=vectors[i : i + batch],
                documents=[c.text for c in part],
                metadatas=[{**c.metadata, "sha": chunk_sha(c)} for c in part],
            )

    return run


def stages(n: int, work: Path) -> dict[str, Any]:
    from sleuth.corpus.models import Document
    from sleuth.embed import INGEST_BATCH
    from sleuth.index import Index
    from sleuth.index.graph import CorpusGraph
    from sleuth.index.lexical import ChunkRow, LexicalIndex
    from sleuth.index.store import _search_text
    from sleuth.index.update import chunk_sha

    docs = [Document(id=i, title=t or None, text=x) for i, t, x in corpus(n)]
    index = Index.create(work / "chunking", embedder="hash:384")
    t0, c0 = time.perf_counter(), time.process_time()
    chunks = [c for d in docs for c in index._chunks_of(d)]
    m = len(chunks)
    out: dict[str, Any] = {"documents": n, "chunks": m}
    out["chunking"] = {"cpu_ms_per_chunk": round((time.process_time() - c0) / m * 1e3, 3),
                       "wall_s": round(time.perf_counter() - t0, 1)}  # fmt: skip
    texts = [_search_text(c) for c in chunks]
    vectors, out["embed_hash384"] = cpu_ms(lambda: index.embedder.embed_documents(texts), m)
    rows = [
        ChunkRow(c.id, c.doc_id, c.idx, c.text, c.tokens, c.metadata.get("title") or "",
                 chunk_sha(c))
        for c in chunks
    ]  # fmt: skip
    lex, out["lexical_build"] = cpu_ms(lambda: LexicalIndex.build(rows, {"generation": 1}), m)
    out["lexical_save"] = cpu_ms(lambda: lex.save(work / "lexical"), m)[1]
    graph, out["graph_build"] = cpu_ms(lambda: CorpusGraph.build(lex.rows, lex.stamp), m)
    out["graph_save"] = cpu_ms(lambda: graph.save(work / "graph"), m)[1]
    biggest = index.client.get_max_batch_size()
    for name, batch, add in (
        (f"chroma_upsert_{INGEST_BATCH}", INGEST_BATCH, False),
        (f"chroma_add_{INGEST_BATCH}", INGEST_BATCH, True),
        (f"chroma_upsert_{biggest}", biggest, False),
    ):
        fresh = Index.create(work / name, embedder="hash:384")
        out[name] = cpu_ms(writer(fresh.collection, chunks, vectors, batch, add), m)[1]
    return out


def growth(n: int, segment: int, work: Path) -> list[dict[str, Any]]:
    """Upserts (batches of ``INGEST_BATCH``) into one collection, CPU a chunk per segment."""
    from sleuth.corpus.models import Chunk
    from sleuth.embed import INGEST_BATCH
    from sleuth.index import Index

    collection = Index.create(work / "grow", embedder="hash:384").collection
    rng = np.random.default_rng(0)
    out = []
    rows = corpus(n)
    for start in range(0, n, segment):
        part = [
            Chunk(id=f"{i}_0", doc_id=i, idx=0, text=x, tokens=100, metadata={"title": t or ""})
            for _, (i, t, x) in zip(range(segment), rows, strict=False)
        ]
        vectors = rng.standard_normal((len(part), 384)).astype(np.float32)
        run = writer(collection, part, vectors, INGEST_BATCH, add=False)
        out.append({"from": start, **cpu_ms(run, len(part))[1]})
        print(json.dumps(out[-1]), flush=True)
    return out


def gil_probe(work: Path, n: int = 4000) -> dict[str, float]:
    """A Python thread's loop count a second while idle and while Chroma writes."""
    from sleuth.corpus.models import Chunk
    from sleuth.embed import INGEST_BATCH
    from sleuth.index import Index

    count, stop = [0], threading.Event()

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1

    chunks = [
        Chunk(id=f"{i}_0", doc_id=i, idx=0, text=x, tokens=100, metadata={"title": t or ""})
        for i, t, x in corpus(n)
    ]
    vectors = np.random.default_rng(1).standard_normal((n, 384)).astype(np.float32)
    run = writer(Index.create(work / "gil", embedder="hash:384").collection, chunks, vectors,
                 INGEST_BATCH, add=False)  # fmt: skip
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    c0, t0 = count[0], time.perf_counter()
    time.sleep(2.0)
    idle = (count[0] - c0) / (time.perf_counter() - t0)
    c0, t0 = count[0], time.perf_counter()
    run()
    busy = (count[0] - c0) / (time.perf_counter() - t0)
    stop.set()
    return {"spin_per_s_idle": round(idle), "spin_per_s_during_writes": round(busy),
            "share": round(busy / idle, 3)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="paragraphs for the stage timings")
    ap.add_argument("--grow", type=int, default=60_000, help="chunks upserted into one collection")
    ap.add_argument("--segment", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ingest-stages-"))
    try:
        import os

        report: dict[str, Any] = {"load": os.getloadavg()}
        report["stages"] = stages(a.n, work)
        print(json.dumps(report["stages"]), flush=True)
        report["gil"] = gil_probe(work)
        print(json.dumps(report["gil"]), flush=True)
        if a.grow:
            report["growth"] = growth(a.grow, a.segment, work)
        report["load_end"] = os.getloadavg()
        a.out.write_text(json.dumps(report, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
