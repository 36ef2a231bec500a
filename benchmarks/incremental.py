"""Incremental ingest next to a full re-ingest: add 1%, delete 1%, change 1% of an N-chunk index.

Corpus: the Wikipedia paragraphs of the shared QA samples (HotpotQA, MuSiQue and 2WikiMultihopQA
dev, about 14k distinct paragraphs, each one chunk at the default 512 tokens). To reach N they
are repeated: copy ``c`` of a paragraph (id ``<id>~c``) has its sentences rotated by ``c`` and
``[copy c]`` appended, so every copy is a distinct text, a distinct vector and a distinct BM25 row.

In one run, on one index: ingest N documents; then three updates, each timed next to a full
ingest of the same documents into a new index (the only way to update before incremental ingest):

- add: 1% new documents (the whole set given again: the unchanged 100% are skipped by hash);
- delete: 1% of the documents left out, with ``delete_missing``;
- change: 1% of the documents' texts revised.

The embedder dominates a full ingest, so the figures depend on it: ``hash:384`` (the test
embedder: MiniLM's dimension, near-free vectors, so what remains is chunking, Chroma and the
lexical side) at 100k chunks, and the default ``minilm-onnx-int8`` at a smaller N.

    nice -n 10 python benchmarks/incremental.py --chunks 100000 --embedder hash:384
    nice -n 10 python benchmarks/incremental.py --chunks 10000 --embedder minilm-onnx-int8
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import qa_paragraphs  # noqa: E402
from sleuth.corpus.models import Document  # noqa: E402
from sleuth.index import Index  # noqa: E402
from sleuth.index.lexical import LexicalIndex  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def corpus(n: int) -> list[Document]:
    """``n`` documents: the paragraphs, then perturbed copies of them (see the module doc)."""
    base, out, copy = qa_paragraphs(), [], 0
    while len(out) < n:
        for d in base[: n - len(out)]:
            if copy == 0:
                out.append(d)
                continue
            sentences = _SENTENCE.split(d.text)
            k = copy % len(sentences)
            text = " ".join(sentences[k:] + sentences[:k]) + f" [copy {copy}]"
            out.append(d.model_copy(update={"id": f"{d.id}~{copy}", "text": text}))
        copy += 1
    return out


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _full(work: Path, docs: list[Document], embedder: str, batch: int, name: str) -> float:
    """Seconds of a full ingest of ``docs`` into a new index (deleted afterwards; each its own
    folder: chromadb keeps one client per path, which a deleted folder would leave broken)."""
    fresh = work / name
    seconds, _ = _timed(lambda: Index.create(fresh, embedder=embedder).ingest(docs, batch))
    shutil.rmtree(fresh, ignore_errors=True)
    return seconds


def run(n: int, embedder: str, batch: int, work: Path, out: Path, command: str) -> dict:
    docs = corpus(n + n // 100)
    base, extra = docs[:n], docs[n:]
    step = 100  # every 100th document: 1%, spread over the corpus
    added = base + extra
    kept = [d for i, d in enumerate(added) if i % step != 1]
    changed = [
        d.model_copy(update={"text": d.text + " (revised)"}) if i % step == 2 else d
        for i, d in enumerate(kept)
    ]
    report: dict = {
        "command": command,
        "embedder": embedder,
        "documents": n,
        "corpus": "Wikipedia paragraphs of the shared HotpotQA/MuSiQue/2Wiki dev samples, "
        "repeated with rotated sentences (see the module doc)",
        "rows": [],
    }
    index_path = work / "inc"
    seconds, result = _timed(
        lambda: Index.create(index_path, embedder=embedder).ingest(base, batch)
    )
    report["base"] = {"seconds": round(seconds, 1), **result.model_dump()}  # type: ignore[attr-defined]
    _save(out, report)
    print(f"base: {n} documents, {report['base']['index_chunks']} chunks in {seconds:.1f} s")
    for what, new_docs, delete in (
        ("add 1%", added, False),
        ("delete 1%", kept, True),
        ("change 1%", changed, False),
    ):
        index = Index.create(index_path, embedder=embedder)
        inc, res = _timed(lambda: index.ingest(new_docs, batch, delete_missing=delete))  # noqa: B023
        full = _full(work, new_docs, embedder, batch, f"fresh-{len(report['rows'])}")
        row = {
            "update": what,
            "incremental_s": round(inc, 1),
            "full_reingest_s": round(full, 1),
            "speedup": round(full / inc, 1),
            "chunks_embedded": res.embedded_chunks,  # type: ignore[attr-defined]
            **{k: getattr(res, k) for k in ("added", "replaced", "unchanged", "deleted")},
            "index_chunks": res.index_chunks,  # type: ignore[attr-defined]
        }
        report["rows"].append(row)
        _save(out, report)
        print(
            f"{what:>10}: incremental {inc:7.1f} s | full re-ingest {full:7.1f} s | "
            f"x{full / inc:.1f} | added {row['added']} replaced {row['replaced']} "
            f"deleted {row['deleted']}"
        )
    rows = Index.open(index_path).lexical.rows
    lex_s, _ = _timed(lambda: LexicalIndex.build(list(rows), {}))
    report["lexical_build_s"] = round(lex_s, 1)
    print(f"of which the lexical side (BM25 + grep over {len(rows)} rows) takes {lex_s:.1f} s")
    _save(out, report)
    return report


def _save(out: Path, report: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="N: documents (one chunk each)")
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    args = parser.parse_args()
    name = re.sub(r"[^a-z0-9]+", "_", args.embedder.lower()).strip("_")
    out = RESULTS / f"incremental_{name}_{args.chunks}.json"
    command = "python benchmarks/incremental.py " + " ".join(sys.argv[1:])
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        run(args.chunks, args.embedder, args.batch_size, Path(tmp), out, command)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
