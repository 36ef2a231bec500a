"""The lexical side alone at a size the full index cannot reach on a shared 2-core machine in
an afternoon (1M chunks: Chroma's upsert alone costs ~1 ms a chunk): built, saved, reopened and
timed as the tools use it. Called by ``scale.py`` in its own subprocesses."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import numpy as np

from _scale_corpus import corpus, pcts, rss_now_mib, rss_peak_mib, timed


def lexical_parts(lex) -> dict[str, float]:
    """Bytes the lexical side holds in RAM, by part (MiB)."""
    bm25 = sum(a.nbytes for a in lex.retriever.scores.values() if hasattr(a, "nbytes"))
    g = lex.grep
    grep = sum(getattr(g, k).nbytes for k in ("starts", "offsets", "tri_keys", "tri_offsets"))
    cols = getattr(lex.rows, "strings", None)  # columns: texts stay in the mapped files
    text = 0 if cols else sum(len(r.text) + len(r.title) for r in lex.rows)
    return {
        "bm25_matrix_mib": round(bm25 / 2**20, 1),
        "grep_in_ram_mib": round((grep + g.tri_tokens.nbytes + len(g.vocab)) / 2**20, 1),
        "grep_postings_mmap_mib": round(g.postings.nbytes / 2**20, 1),
        "chunk_text_chars_mib": round(text / 2**20, 1),
        "chunk_text_mmap_mib": round(len(cols["text"].blob) / 2**20, 1) if cols else 0,
        "vocab_terms_bm25": len(lex.retriever.vocab_dict),
    }


def phase_lexbuild(n: int, folder: Path) -> dict:
    """The lexical side alone (bm25s, grep postings, rows) over ``n`` chunks, saved to ``folder``."""
    from sleuth.index.lexical import ChunkRow, LexicalIndex

    rows = [ChunkRow(f"{i}_0", str(i), 0, x, len(x.split()) * 4 // 3, t) for i, t, x in corpus(n)]
    rss_rows = rss_now_mib()
    t0 = time.perf_counter()
    lex = LexicalIndex.build(rows, {"n": n})
    build_s = time.perf_counter() - t0
    rss_built = rss_now_mib()
    t0 = time.perf_counter()
    lex.save(folder)
    return {
        "chunks": n,
        "rss_rows_mib": round(rss_rows),
        "build_s": round(build_s, 1),
        "rss_built_mib": round(rss_built),
        "save_s": round(time.perf_counter() - t0, 1),
        "build_peak_rss_mib": round(rss_peak_mib()),
        "size_mib": round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20),
    }


def index_lexical(index: Path) -> Path:
    """The lexical side a full index serves: the folder its manifest names (``lexical-G`` after
    an update), not a guessed ``lexical``."""
    from sleuth.index.manifest import read_manifest

    return index / read_manifest(index).lexical_dir


def phase_lexserve(folder: Path, questions: int) -> dict:
    """Open a saved lexical side; BM25 top 25 (search_corpus's ``bm25_k``; partial vs full sort,
    side by side), the selector's BM25 evidence (first vs repeated question), grep and read.
    The side is opened as it is on disk (never upgraded or rewritten): what serving maps."""
    import sleuth.index.lexical as lexmod
    from _corpus import questions as read_questions
    from _grep_scale import grep_patterns
    from sleuth.index.reads import IndexReads
    from sleuth.ranking.evidence import _best_per_document
    from sleuth.tools.toolbox import Toolbox

    rss0 = rss_now_mib()
    t0 = time.perf_counter()
    lex = lexmod.LexicalIndex.load(folder, upgrade=False)
    if lex is None:
        raise SystemExit(f"no lexical side at {folder}")
    out: dict = {"chunks": len(lex.rows), "open_s": round(time.perf_counter() - t0, 2)}
    out["rss_open_mib"] = round(rss_now_mib() - rss0)
    qs = read_questions(questions)
    partial, full = lexmod.rank_scores, full_sort
    times: dict[str, list[float]] = {k: [] for k in ("partial", "full", "first", "again")}
    for q in qs:
        for name, fn in (("partial", partial), ("full", full), ("partial", partial)):
            lex._recent.clear()
            lexmod.rank_scores = fn
            t0 = time.perf_counter()
            lex.search(q, 25)
            times[name].append(time.perf_counter() - t0)
        lexmod.rank_scores = partial
        for name in ("first", "again"):
            if name == "first":
                lex._recent.clear()
            t0 = time.perf_counter()
            if (scores := lex.scores(q)) is not None:
                _best_per_document(lex.doc_of_row, scores, len(lex.rows_of_doc))
            times[name].append(time.perf_counter() - t0)
    out["bm25_top25_partial_sort"], out["bm25_top25_full_sort"] = (
        pcts(times["partial"]),
        pcts(times["full"]),
    )
    out["evidence_bm25_first"], out["evidence_bm25_repeat"] = (
        pcts(times["first"]),
        pcts(times["again"]),
    )

    class LexOnly(IndexReads):
        lexical = lex

    tools = Toolbox(LexOnly())  # type: ignore[arg-type]
    rng = random.Random(1)
    base = [r.text for r in rng.sample(lex.rows, min(3000, len(lex.rows)))]
    greps = [p for ps in grep_patterns(base, 4).values() for p in ps]
    out["grep_corpus"] = timed(tools.grep_corpus, [(p,) for p in greps])
    docs = rng.sample(list(lex.rows_of_doc), min(50, len(lex.rows_of_doc)))
    out["read_document"] = timed(tools.read_document, [(d,) for d in docs])
    out["parts"] = lexical_parts(lex)
    out["peak_rss_mib"] = round(rss_peak_mib())
    return out


def full_sort(scores: np.ndarray, k: int, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """rank_scores before its partial sort: every positive score sorted."""
    from sleuth.index.lexical import SCORE_DECIMALS

    positive = np.flatnonzero(scores > 0)
    rounded = np.round(scores[positive].astype(np.float64), SCORE_DECIMALS)
    second = positive if tiebreak is None else tiebreak[positive]
    return positive[np.lexsort((second, -rounded))[:k]]


def private_mib() -> float:
    """Resident memory less its file-backed pages (mapped files the kernel can drop)."""
    with open("/proc/self/statm") as f:
        _, resident, shared, *_ = map(int, f.read().split())
    return (resident - shared) * os.sysconf("SC_PAGE_SIZE") / 2**20


def phase_lexconvert(old: Path, new: Path) -> dict:
    """The JSON-lines side ``lexbuild`` wrote before columns (format 4), saved as columns."""
    from dataclasses import replace

    from sleuth.index.lexical import LexicalIndex

    t0 = time.perf_counter()
    lex = LexicalIndex.load(old, upgrade=False)
    assert lex is not None, old
    load_s = time.perf_counter() - t0
    lex.rows = [replace(r, doc_id=str(r.doc_id)) for r in lex.rows]  # older builds: int ids
    t0 = time.perf_counter()
    lex.save(new)
    size = sum(f.stat().st_size for f in new.rglob("*") if f.is_file())
    return {"jsonl_load_s": round(load_s, 1), "save_s": round(time.perf_counter() - t0, 1),
            "size_mib": round(size / 2**20)}  # fmt: skip


def phase_lexopen(folder: Path, questions: int) -> dict:
    """Open a saved side (either format, never rewritten), then first use: 5 BM25 searches,
    the rows of 50 documents, grep's scan over 20,000 texts; time and memory of each."""
    from _corpus import questions as read_questions
    from sleuth.index.columns import HEADER
    from sleuth.index.lexical import LexicalIndex

    qs = read_questions(min(questions, 5))
    rss0, private0 = rss_now_mib(), private_mib()
    t0 = time.perf_counter()
    lex = LexicalIndex.load(folder, upgrade=False)
    assert lex is not None, folder
    out: dict = {"format": "columns" if (folder / HEADER).exists() else "jsonl"}
    out["open_s"] = round(time.perf_counter() - t0, 2)
    out["rss_open_mib"], out["private_open_mib"] = (
        round(rss_now_mib() - rss0),
        round(private_mib() - private0),
    )
    t0 = time.perf_counter()
    for q in qs:
        lex.search(q, 25)
    docs = random.Random(1).sample(list(lex.rows_of_doc), 50)
    read = [lex.rows[i].text for d in docs for i in lex.rows_of_doc[d]]
    texts = lex.texts
    scanned = sum(len(texts[i]) for i in range(min(20_000, len(texts))))
    out["first_use_s"] = round(time.perf_counter() - t0, 2)
    out["rss_used_mib"], out["private_used_mib"] = (
        round(rss_now_mib() - rss0),
        round(private_mib() - private0),
    )
    out["peak_rss_mib"], out["checked"] = round(rss_peak_mib()), len(read) + scanned
    out["lookups"] = time_lookups(lex)
    return out


def time_lookups(lex) -> dict:
    """Chunk id -> row, one at a time (present and absent ids) and 1,000 at once (``rows_for``,
    a search's excluded chunks), in microseconds a lookup; then private memory after them."""
    rng = random.Random(2)
    ids = [lex.rows[i].id for i in rng.sample(range(len(lex.rows)), min(2000, len(lex.rows)))]
    absent = [f"{i}-absent" for i in ids]
    out: dict = {}
    for name, keys in (("get_present_us", ids), ("get_absent_us", absent)):
        t0 = time.perf_counter()
        found = sum(lex.row_of.get(k) is not None for k in keys)
        out[name] = round((time.perf_counter() - t0) / len(keys) * 1e6, 2)
        assert found == (len(keys) if keys is ids else 0)
    t0 = time.perf_counter()
    for _ in range(5):
        rows = lex.rows_for(ids[:1000] + absent[:1000])
    out["rows_for_1000_ms"] = round((time.perf_counter() - t0) / 5 * 1e3, 2)
    docs = [lex.rows[i].doc_id for i in rows[:500].tolist()]
    t0 = time.perf_counter()
    assert all(lex.doc_number[d] >= 0 for d in docs)
    out["doc_number_us"] = round((time.perf_counter() - t0) / max(len(docs), 1) * 1e6, 2)
    out["private_after_mib"] = round(private_mib())
    return out


def phase_lexmaps(folder: Path) -> dict:
    """Open a side saved before the id look-ups were, letting this tree add them once."""
    from sleuth.index.lexical import LexicalIndex

    t0 = time.perf_counter()
    lex = LexicalIndex.load(folder)
    assert lex is not None and lex.rows.maps_saved is False, folder
    again = LexicalIndex.load(folder)
    assert again is not None and again.rows.maps_saved, folder
    return {"open_and_add_s": round(time.perf_counter() - t0, 1)}
