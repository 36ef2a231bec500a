"""Chunks/s of each MiniLM path and of `sleuth ingest`, side by side on the same chunks.

Texts: the first N unique paragraphs of the staged HotpotQA, MuSiQue and 2Wiki samples, as the
chunks ingest makes of them (title + text; a paragraph over the chunk size is two chunks, ~4%
more chunks than paragraphs), so every path embeds the same texts. The N paragraphs are cut into R rounds;
every round runs every path on its own slice, one path after the other, so a load change on the
shared machine hits all paths alike. Paths:

- ``st-fp32``: plain sentence-transformers (torch fp32), ``encode`` at batch 64
- ``minilm-onnx`` / ``minilm-onnx-int8`` (and with ``--torch`` the torch ``minilm``, with
  ``--bf16`` torch in bfloat16): sleuth's embedders, called as ingest calls them
  (``INGEST_BATCH`` texts a call)
- ``ingest:SPEC``: ``Index.create`` + ``Index.ingest`` of the round's documents into one index per
  path that grows round by round (chunking, sorting, embedding, Chroma writes, BM25 rebuilt each
  round), the whole end-to-end cost

``--whole`` then times one ingest of all N against the embedder alone on the same chunks (A B B
A), with CPU seconds per 1,000 chunks for both.
``--sweep`` first times the int8 path at each onnxruntime batch size and thread count.
``--cli SPEC,SPEC`` times what a user runs instead: ``sleuth ingest`` of the N paragraphs (one
JSONL file) in a fresh process per run, each spec in turn A B B A, with its peak RSS: model
loads and first-shape costs included, which the rounds above (models loaded, shapes warm) leave out.

    python benchmarks/embed_speed.py --n 2000 --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from _child import run_sleuth
from sleuth.corpus.models import Document
from sleuth.embed import DEFAULT_EMBEDDER, INGEST_BATCH, make_embedder, minilm_path
from sleuth.embed import onnx as onnx_embed
from sleuth.index import Index
from sleuth.tasks import read_2wiki, read_hotpotqa, read_musique

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
console = Console(width=140)


def paragraphs(n: int) -> list[Document]:
    """The first ``n`` unique paragraphs, taken round-robin from the three samples."""
    pools = [
        read_hotpotqa(SHARED / "hotpotqa_distractor_dev")[0],
        read_musique(SHARED / "musique_ans_dev")[0],
        read_2wiki(SHARED / "2wikimultihopqa_dev")[0],
    ]
    seen: dict[str, Document] = {}
    for group in zip(*pools, strict=False):
        for d in group:
            seen.setdefault(d.id, d)
    docs = list(seen.values())
    if len(docs) < n:
        raise SystemExit(f"only {len(docs)} paragraphs staged; use --n {len(docs)} or less")
    return docs[:n]


Texts = Callable[[Sequence[Document]], list[str]]
"""The texts ingest embeds for some documents: their chunks, title first."""


def chunk_texts(docs: Sequence[Document], folder: Path) -> Texts:
    """:data:`Texts` read from an index of ``docs`` built once, untimed."""
    index = Index.create(folder, embedder=DEFAULT_EMBEDDER)
    index.ingest(docs)
    chunks: dict[str, list[str]] = {}
    for r in sorted(index.lexical.rows, key=lambda r: (r.doc_id, r.idx)):
        chunks.setdefault(r.doc_id, []).append(f"{r.title}\n{r.text}" if r.title else r.text)
    return lambda part: [t for d in part for t in chunks[d.id]]


def st_path(texts: Texts) -> Callable[[Sequence[Document]], None]:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_path(), device="cpu", local_files_only=True)
    return lambda docs: model.encode(texts(docs), batch_size=64, normalize_embeddings=True)


def embedder_path(spec: str, texts: Texts) -> Callable[[Sequence[Document]], None]:
    embedder = make_embedder(spec)
    return lambda docs: embedder.embed_documents(texts(docs), batch_size=INGEST_BATCH)


def ingest_path(spec: str, tmp: Path) -> Callable[[Sequence[Document]], None]:
    """Each round's documents are ingested into the same index, as one growing corpus."""
    make_embedder(spec)  # loaded once, outside the timing, as a long-running process would
    folder = Path(tempfile.mkdtemp(dir=tmp)) / "ix"
    return lambda docs: Index.create(folder, embedder=spec).ingest(docs)


def timed_rounds(
    paths: dict[str, Callable[[Sequence[Document]], None]],
    docs: list[Document],
    rounds: int,
    warm: list[Document],
    texts: Texts,
) -> dict[str, float]:
    """Seconds per path over all rounds; every round runs every path on its own slice."""
    for run in paths.values():  # warm-up (other texts): first session run, Chroma start
        run(warm)
    seconds = dict.fromkeys(paths, 0.0)
    size, done = -(-len(docs) // rounds), 0
    for r in range(rounds):
        part = docs[r * size : (r + 1) * size]
        for name, run in paths.items():
            t0 = time.perf_counter()
            run(part)
            seconds[name] += time.perf_counter() - t0
        done += len(texts(part))
        rates = {k: f"{done / v:.1f}" for k, v in seconds.items()}
        console.print(f"round {r + 1}/{rounds}: chunks/s so far {rates}")
    return seconds


def whole_ingest(docs: list[Document], tmp: Path, chunks: Texts) -> float:
    """Ingest ÷ its embedder alone on the very chunks ingest embeds, each over all of them in
    one call, timed A B B A (a fresh index each time): a user's one ingest pays its fixed costs
    once, not once a round. CPU seconds too: on a machine whose cores the embedder already
    fills, every other step of ingest (chunking, Chroma's writes, BM25 and graph) costs wall."""
    embedder, texts = make_embedder(DEFAULT_EMBEDDER), chunks(docs)
    wall, cpu = {"alone": 0.0, "ingest": 0.0}, {"alone": 0.0, "ingest": 0.0}

    def ingest() -> None:
        folder = Path(tempfile.mkdtemp(dir=tmp)) / "ix"
        Index.create(folder, embedder=DEFAULT_EMBEDDER).ingest(docs)

    def alone() -> None:
        embedder.embed_documents(texts, batch_size=INGEST_BATCH)

    for name in ("alone", "ingest", "ingest", "alone"):
        t0, c0 = time.perf_counter(), time.process_time()
        (alone if name == "alone" else ingest)()
        wall[name] += time.perf_counter() - t0
        cpu[name] += time.process_time() - c0
    rate = {k: 2 * len(texts) / v for k, v in wall.items()}
    console.print(
        f"one ingest of {len(docs)} documents, {len(texts)} chunks ({DEFAULT_EMBEDDER}): "
        f"{rate['ingest']:.1f} chunks/s, embedder alone on the same chunks {rate['alone']:.1f}: "
        f"{rate['ingest'] / rate['alone']:.2f}x; CPU s per 1,000 chunks: ingest "
        f"{500 * cpu['ingest'] / len(texts):.2f}, embedder {500 * cpu['alone'] / len(texts):.2f}"
    )
    return rate["ingest"] / rate["alone"]


def cli_ingests(docs: list[Document], specs: list[str], tmp: Path) -> None:
    """Wall seconds and peak RSS of ``sleuth ingest`` per spec, fresh processes, A B B A."""
    source = tmp / "paragraphs.jsonl"
    rows = ({"id": d.id, "title": d.title, "text": d.text} for d in docs)
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs: dict[str, list[tuple[float, int]]] = {s: [] for s in specs}
    for spec in [*specs, *reversed(specs)]:
        folder = Path(tempfile.mkdtemp(dir=tmp)) / "ix"
        args = ["ingest", str(source), "-i", str(folder), "--embedder", spec]
        runs[spec].append(run_sleuth(args, tmp / "ingest.log"))
    chunks = json.loads((folder / "sleuth-index.json").read_text())["chunks"]
    table = Table(title=f"sleuth ingest, fresh process: {len(docs)} paragraphs, {chunks} chunks")
    for col in ("embedder", "seconds (runs)", "chunks/s", "peak RSS MB"):
        table.add_column(col, justify="left" if col == "embedder" else "right")
    for spec, got in runs.items():
        seconds = sum(s for s, _ in got) / len(got)
        walls = " / ".join(f"{s:.1f}" for s, _ in got)
        table.add_row(spec, walls, f"{chunks / seconds:.1f}", str(max(r for _, r in got)))
    console.print(table)


def sweep(texts: list[str], batches: Sequence[int], threads: Sequence[int]) -> None:
    """Chunks/s of the int8 path per onnxruntime batch size and thread count (interleaved)."""
    models = {t: onnx_embed.OnnxMiniLM(minilm_path(), "int8", "sweep", threads=t) for t in threads}
    keys = [(t, b) for t in threads for b in batches]
    seconds = dict.fromkeys(keys, 0.0)
    default = onnx_embed.INFER_BATCH
    try:
        for half in (texts[::2], texts[1::2]):
            for t, b in keys:
                onnx_embed.INFER_BATCH = b
                t0 = time.perf_counter()
                models[t].embed_documents(half, batch_size=max(batches))
                seconds[(t, b)] += time.perf_counter() - t0
    finally:
        onnx_embed.INFER_BATCH = default
    table = Table(title=f"int8 sweep, {len(texts)} chunks (chunks/s)")
    table.add_column("threads")
    for b in batches:
        table.add_column(f"batch {b}", justify="right")
    for t in threads:
        table.add_row(str(t), *(f"{len(texts) / seconds[(t, b)]:.1f}" for b in batches))
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="paragraphs (about 4% more chunks)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--sweep", type=int, default=0, help="paragraphs for the batch/thread sweep")
    ap.add_argument("--whole", action="store_true", help="also one ingest of all N (A B B A)")
    ap.add_argument("--torch", action="store_true", help="also time minilm and ingest:minilm")
    ap.add_argument("--bf16", action="store_true", help="also minilm-bf16 and its ingest")
    ap.add_argument("--cli", default="", help="only time `sleuth ingest` with these specs (a,b)")
    args = ap.parse_args()
    docs = paragraphs(args.n + 8)
    docs, warm = docs[: args.n], docs[args.n :]
    cores = onnx_embed.default_threads()
    console.print(
        f"{len(docs)} paragraphs, {args.rounds} rounds, {cores} cores, load {os.getloadavg()}"
    )
    if args.cli:
        with tempfile.TemporaryDirectory() as tmp:
            cli_ingests(docs, args.cli.split(","), Path(tmp))
        return
    with tempfile.TemporaryDirectory() as tmp:
        texts = chunk_texts(docs + warm, Path(tmp) / "chunks")
        if args.sweep:
            sweep(texts(docs[: args.sweep]), [8, 16, 32, 64], sorted({1, cores}))
        paths = {
            "st-fp32": st_path(texts),
            "minilm-onnx": embedder_path("minilm-onnx", texts),
            "minilm-onnx-int8": embedder_path("minilm-onnx-int8", texts),
            f"ingest:{DEFAULT_EMBEDDER}": ingest_path(DEFAULT_EMBEDDER, Path(tmp)),
        }
        if args.torch:
            paths["minilm"] = embedder_path("minilm", texts)
            paths["ingest:minilm"] = ingest_path("minilm", Path(tmp))
        if args.bf16:
            paths["minilm-bf16"] = embedder_path("minilm-bf16", texts)
            paths["ingest:minilm-bf16"] = ingest_path("minilm-bf16", Path(tmp))
        seconds = timed_rounds(paths, docs, args.rounds, warm, texts)
        if args.whole:
            whole_ingest(docs, Path(tmp), texts)
    report(seconds, len(texts(docs)))


def report(seconds: dict[str, float], n: int) -> None:
    rate = {k: n / v for k, v in seconds.items()}
    table = Table(title=f"{n} chunks, same run (load {os.getloadavg()[0]:.1f})")
    for col in ("path", "chunks/s", "x st-fp32", "x own embedder"):
        table.add_column(col, justify="left" if col == "path" else "right")
    for name, r in rate.items():
        own = rate.get(name.removeprefix("ingest:")) if name.startswith("ingest:") else None
        own_cell = f"{r / own:.2f}" if own else ""
        table.add_row(name, f"{r:.1f}", f"{r / rate['st-fp32']:.2f}", own_cell)
    console.print(table)


if __name__ == "__main__":
    main()
