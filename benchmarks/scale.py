"""A million chunks on one machine: size, memory and latency of an index at 100k and 1M chunks.

Corpus (``_scale_corpus.py``): the 7,277 staged HotpotQA, MuSiQue and 2Wiki paragraphs (one
chunk each), repeated until N. Copy 0 is the original paragraph (the questions' gold paragraphs
are in the index); copy j >= 1 gets id ``<id>-r<j>``, the same title, and its text perturbed by
a seeded RNG: sentences rotated, 10% of words dropped, 10% replaced by a word drawn from a pool
of 3,000 paragraphs' words (document frequencies keep a Zipf shape instead of each scaling by
N/7,277), every digit of the other numbers redrawn. Each phase runs in its own ``nice -n 15``
subprocess; peak RSS is that process's ``ru_maxrss``.

- ``embed``: ``embed_speed.py``'s paths (st fp32, ONNX fp32, ONNX int8, a real ingest with the
  default) side by side on a sample of the paragraphs.
- ``build`` (sizes up to ``--full-max``): ``Index.create`` + one ``Index.ingest`` of all N, the
  dense vectors from the ``hash:384`` embedder (the manifest says ``minilm-onnx-int8``, so
  serving embeds its queries with the real model); ``serve``: ``Index.open`` in a fresh process,
  ``search_corpus`` / ``grep_corpus`` / ``read_document`` p50/p95, the default agent and
  single-pass question by question, and with ``--profile`` a cProfile of the default agent.
- ``lexbuild`` / ``lexserve`` (``_scale_lexical.py``): the lexical side alone (bm25s, grep
  postings, chunk rows: what the index holds in RAM per chunk) at every size, built, saved,
  reopened and timed as the tools use it.

    nice -n 15 python benchmarks/scale.py --sizes 100000 1000000 --profile
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale_corpus import (  # noqa: E402
    base_documents,
    corpus,
    rss_now_mib,
    rss_peak_mib,
    timed,
)

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"


class HashAsMiniLM:
    """The ``hash:384`` vectors under the default embedder's name: ingest cost without the model."""

    def __init__(self) -> None:
        from sleuth.embed import DEFAULT_EMBEDDER, make_embedder

        self._hash = make_embedder("hash:384")
        self.spec, self.dim = DEFAULT_EMBEDDER, 384

    def embed_documents(self, texts, batch_size=64, progress=None):
        vecs = self._hash.embed_documents(texts, batch_size=batch_size)
        if progress:
            progress(len(texts))
        return vecs

    def embed_query(self, text):
        return self._hash.embed_query(text)


def folder_mib(path: Path) -> dict[str, float]:
    sizes: dict[str, float] = {}
    for p in path.rglob("*"):
        if p.is_file():
            part = p.relative_to(path).parts[0]
            sizes[part] = sizes.get(part, 0.0) + p.stat().st_size / 2**20
    return {k: round(v, 1) for k, v in sorted(sizes.items())}


def phase_build(n: int, folder: Path) -> dict:
    from sleuth.corpus.models import Document
    from sleuth.index import Index

    t0 = time.perf_counter()
    docs = [Document(id=i, title=t or None, text=x) for i, t, x in corpus(n)]
    gen_s = time.perf_counter() - t0
    rss_docs = rss_now_mib()
    index = Index.create(folder)  # the default embedder's manifest
    index._embedder = index._dim_checked = HashAsMiniLM()  # type: ignore[assignment]
    t0 = time.perf_counter()
    index.ingest(docs)
    ingest_s = time.perf_counter() - t0
    return {
        "chunks": len(index),
        "generate_s": round(gen_s, 1),
        "rss_docs_mib": round(rss_docs),
        "ingest_s": round(ingest_s, 1),
        "ingest_chunks_per_s_hash": round(len(index) / ingest_s, 1),
        "ingest_peak_rss_mib": round(rss_peak_mib()),
        "size_mib": folder_mib(folder),
    }


def phase_serve(n: int, folder: Path, questions: int, profile: bool) -> dict:
    import sleuth
    from _corpus import questions as read_questions
    from _grep_scale import grep_patterns
    from sleuth.index import Index

    rss0 = rss_now_mib()
    t0 = time.perf_counter()
    index = sleuth.Index.open(folder)
    open_s = time.perf_counter() - t0
    rss_open = rss_now_mib()
    assert isinstance(index, Index)
    qs = read_questions(questions)
    rng = random.Random(1)
    base = [r.text for r in rng.sample(index.lexical.rows, min(3000, len(index)))]
    greps = [p for ps in grep_patterns(base, 4).values() for p in ps]
    docs = rng.sample(index.documents, 50)
    out: dict = {"open_s": round(open_s, 2), "rss_before_open_mib": round(rss0)}
    index.search(qs[0])  # the first query loads Chroma's HNSW and the query embedder
    out["first_search_s"] = round(time.perf_counter() - t0 - open_s, 2)
    out["rss_open_mib"], out["rss_after_first_search_mib"] = round(rss_open), round(rss_now_mib())
    out["search_corpus"] = timed(index.search, [(q,) for q in qs])
    out["grep_corpus"] = timed(index.grep, [(p,) for p in greps])
    out["read_document"] = timed(index.read, [(d,) for d in docs])
    agents = {p: sleuth.Agent(index, policy=p) for p in ("heuristic", "single-pass")}
    runs = Path(folder).parent / "runs"
    seconds: dict[str, list[float]] = {p: [] for p in agents}
    for i, q in enumerate(qs):
        for p, agent in agents.items():
            t0 = time.perf_counter()
            agent.search(q, trajectory=runs / f"{p}-{i}.jsonl")
            seconds[p].append(time.perf_counter() - t0)
    out["agent_s_per_question"] = {
        p: {"median": round(float(np.median(v)), 3), "mean": round(float(np.mean(v)), 3)}
        for p, v in seconds.items()
    }
    out["serve_peak_rss_mib"] = round(rss_peak_mib())
    if profile:
        fresh = read_questions(questions + 10)[questions:]  # not asked yet: no warm caches
        out["profile"] = profile_agent(index, fresh, runs)
    return out


def profile_agent(index, qs: list[str], runs: Path) -> dict:
    """cProfile of the default agent on ``qs`` (tools run in turn: cProfile sees one thread):
    seconds a question by stage and the top functions (``agent_speed.profile``)."""
    import sleuth
    from agent_speed import profile
    from sleuth.harness.loop import HarnessConfig

    agent = sleuth.Agent(index, harness=HarnessConfig(parallel_tools=False))
    t0 = time.perf_counter()
    for i, q in enumerate(qs):
        agent.search(q, trajectory=runs / f"plain-{i}.jsonl")
    plain_s = (time.perf_counter() - t0) / len(qs)
    return {"sequential_tools_s_per_question": round(plain_s, 3), **profile(index, qs, runs)}


def phase_embed(n: int) -> dict:
    """The MiniLM paths and a real ingest on ``n`` paragraphs, side by side (embed_speed.py)."""
    import tempfile

    import embed_speed as es

    docs = base_documents()
    sample, warm = docs[:n], docs[n : n + 8]
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            "st-fp32": es.st_path(),
            "minilm-onnx": es.embedder_path("minilm-onnx"),
            "minilm-onnx-int8": es.embedder_path("minilm-onnx-int8"),
            "ingest:minilm-onnx-int8": es.ingest_path("minilm-onnx-int8", Path(tmp)),
        }
        seconds = es.timed_rounds(paths, sample, 1, warm)
    return {k: round(n / v, 1) for k, v in seconds.items()}


def child(args: list[str], env: dict[str, str] | None = None) -> dict:
    cmd = ["nice", "-n", "15", sys.executable, __file__, *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--full-max", type=int, default=100_000, help="largest full index built")
    ap.add_argument("--work", type=Path, default=Path("/tmp/sleuth-scale"))
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--embed-sample", type=int, default=1000, help="0: skip the embed phase")
    ap.add_argument("--profile", action="store_true", help="cProfile the agent at the first size")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--compare-open", type=int, default=0, metavar="RUNS",
                    help="only: open each size's lexical side in both formats, RUNS times each")  # fmt: skip
    ap.add_argument("--baseline-src", type=Path,
                    help="with --compare-open: the tree before the id look-ups, against this one")  # fmt: skip
    a = ap.parse_args()
    if a.phase:
        print(json.dumps(run_phase(a)))
        return
    if a.compare_open:
        compare_open(a)
        return
    a.work.mkdir(parents=True, exist_ok=True)
    report: dict = {"load": os.getloadavg(), "cores": os.cpu_count(), "sizes": {}}
    if a.embed_sample:
        report["embed_chunks_per_s"] = child(["--phase", "embed", "--n", str(a.embed_sample)])
        print(json.dumps(report["embed_chunks_per_s"]), flush=True)
    common = ["--work", str(a.work), "--questions", str(a.questions)]
    for i, n in enumerate(a.sizes):
        size: dict = {}
        for phase in ("build", "serve") if n <= a.full_max else ("lexbuild",):
            cached = a.work / f"{phase}-{n}.json"  # builds are reused by a rerun
            if phase == "serve" or not cached.exists():
                prof = ["--profile"] if a.profile and i == 0 and phase == "serve" else []
                cached.write_text(
                    json.dumps(child(["--phase", phase, "--n", str(n), *common, *prof]))
                )
            size[phase] = json.loads(cached.read_text())
        size["lexserve"] = child(["--phase", "lexserve", "--n", str(n), *common])
        report["sizes"][str(n)] = size
        print(json.dumps({n: size}), flush=True)
        report["load_end"] = os.getloadavg()
        a.out.write_text(json.dumps(report, indent=1) + "\n")


def compare_open(a: argparse.Namespace) -> None:
    """The lexical side ``lexbuild`` saved as JSON lines (``lex-N``, by the tree before columns)
    and the same rows as columns (``lex-N-cols``, converted once), each opened in a fresh
    process, alternating, so both formats share the machine's load.

    With ``--baseline-src`` (a tree before the id look-ups were saved): ``before`` is that
    tree opening ``lex-N-cols``; ``after`` this tree opening ``lex-N-maps`` (a hard-linked copy
    it added its look-ups to); ``after-unsaved`` this tree opening ``lex-N-cols`` as it is."""
    report: dict = {"load": os.getloadavg(), "sizes": {}, "baseline_src": str(a.baseline_src)}
    base_env = None
    if a.baseline_src:
        bench = Path(__file__).resolve().parent
        base_env = {**os.environ, "PYTHONPATH": f"{a.baseline_src.resolve()}:{bench}"}
    for n in a.sizes:
        common = ["--n", str(n), "--work", str(a.work), "--questions", str(a.questions)]
        cols, maps = a.work / f"lex-{n}-cols", a.work / f"lex-{n}-maps"
        if not (cols / "columns.json").exists():
            child(["--phase", "lexconvert", *common])
        runs = {"jsonl": ["lexopen-jsonl"], "columns": ["lexopen-columns"]}
        if a.baseline_src:
            runs = {"before": ["lexopen-columns"], "after": ["lexopen-maps"]}
            runs["after-unsaved"] = ["lexopen-columns"]
            if not maps.exists():
                subprocess.run(["cp", "-al", str(cols), str(maps)], check=True)
                print(json.dumps(child(["--phase", "lexmaps", *common])), flush=True)
        size: dict = {k: [] for k in runs}
        for run in range(a.compare_open):
            for name in list(runs) if run % 2 == 0 else list(runs)[::-1]:
                env = base_env if name == "before" else None
                size[name].append(child(["--phase", *runs[name], *common], env))
        report["sizes"][str(n)] = size
        print(json.dumps({n: size}), flush=True)
    report["load_end"] = os.getloadavg()
    out = a.out if a.out != RESULTS else RESULTS.with_name("scale_open.json")
    out.write_text(json.dumps(report, indent=1) + "\n")


def run_phase(a: argparse.Namespace) -> dict:
    from _scale_lexical import (
        index_lexical,
        phase_lexbuild,
        phase_lexconvert,
        phase_lexmaps,
        phase_lexopen,
        phase_lexserve,
    )

    full, lexical = a.work / f"ix-{a.n}", a.work / f"lex-{a.n}"
    cols = a.work / f"lex-{a.n}-cols"
    if a.phase.startswith("lexserve"):  # lexserve-jsonl: the side as lexbuild saved it
        side = cols if (cols / "columns.json").exists() and a.phase == "lexserve" else lexical
        return phase_lexserve(index_lexical(full) if full.exists() else side, a.questions)
    if a.phase.startswith("lexopen"):
        side = {"columns": cols, "maps": a.work / f"lex-{a.n}-maps"}.get(a.phase[8:], lexical)
        return phase_lexopen(side, a.questions)
    if a.phase == "lexmaps":
        return phase_lexmaps(a.work / f"lex-{a.n}-maps")
    if a.phase == "lexconvert":
        return phase_lexconvert(lexical, cols)
    return {
        "build": lambda: phase_build(a.n, full),
        "serve": lambda: phase_serve(a.n, full, a.questions, a.profile),
        "embed": lambda: phase_embed(a.n),
        "lexbuild": lambda: phase_lexbuild(a.n, lexical),
    }[a.phase]()


if __name__ == "__main__":
    main()
