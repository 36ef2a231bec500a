"""Seconds per question: the default agent (``heuristic`` + the learned selector) against
single-pass, and the same for another checkout of sleuth, question by question in one run.

Each code tree (this one, and ``--baseline-src`` when given, e.g. a ``git archive`` of the
commit before a change) runs in its own worker process over its own copy of the index; the
coordinator hands every question to each worker in turn (alternating which goes first), so both
see the same machine load. A worker times single-pass then the default agent on the question (wall,
the process's CPU time, which moves less with the load on a shared machine, and its scheduler wait:
time its threads were runnable but waiting for a CPU, from ``/proc/self/task/*/schedstat``, which
with the CPU time accounts for most of the wall on a loaded machine) and
returns the default agent's final ranked list; the run fails when two trees' lists differ (a
speed-up must not change what the agent returns). ``--profile`` adds a cProfile of the default
agent per worker (tools in turn: cProfile sees one thread) with its CPU time by stage.

    nice -n 10 python benchmarks/agent_speed.py --index /work/runs/q-musique/index/MuSiQue-minilm \
        --embedder minilm-onnx-int8 --questions /work/runs/q-musique/MuSiQue/heuristic/results.jsonl \
        --baseline-src /tmp/sleuth-base/src --profile 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
# Stage -> (file suffix, function name): a function's cumulative seconds in the profile. Stages
# nest (a search's Chroma query sits inside search_corpus), so they do not add up. BM25 runs on
# the toolbox's own thread beside the dense query, which cProfile does not see.
STAGES = {
    "run_query (whole question)": ("harness/run.py", "run_query"),
    "search_corpus": ("tools/toolbox.py", "search_corpus"),
    "  query embedding (cached by text)": ("embed/__init__.py", "embed_query"),
    "    computed (ONNX)": ("embed/onnx.py", "embed_documents"),
    "  dense top k (Chroma)": ("index/reads.py", "dense_search"),
    "    Chroma count()": ("api/models/Collection.py", "count"),
    "  search features": ("ranking/features.py", "search_features"),
    "  packing (token counts)": ("tools/toolbox.py", "_pack"),
    "policy (heuristic turns)": ("policies/heuristic.py", "__call__"),
    "  selector rank": ("ranking/selector.py", "rank"),
    "    evidence": ("ranking/evidence.py", "question_evidence"),
    "      graph ppr": ("index/graph.py", "scores"),
    "      stored vectors": ("index/reads.py", "embeddings"),
    "    selection features": ("ranking/features.py", "selection_features"),
    "      chain features": ("ranking/chain.py", "chain_features"),
    "  bridge queries": ("policies/heuristic.py", "_bridge_queries"),
    "  weak chunks (prune)": ("policies/heuristic.py", "_weak_chunks"),
    "  final answer": ("policies/heuristic.py", "answer"),
    "  transcript parsing": ("policies/transcript.py", "observations"),
    "trajectory writes": ("sleuth/io.py", "append_jsonl"),
    "token counting (all)": ("sleuth/tokens.py", "count"),
}


def sched_wait() -> float:
    """Seconds this process's live threads have waited runnable for a CPU (the second field of
    each thread's schedstat); 0.0 where the kernel does not say (no /proc, no schedstats)."""
    total = 0
    for path in Path("/proc/self/task").glob("*/schedstat"):
        try:
            total += int(path.read_text().split()[1])
        except (OSError, IndexError, ValueError):  # a thread gone since the listing
            continue
    return total / 1e9


def read_questions(path: Path, n: int) -> list[str]:
    """``query`` of each line of a JSONL file (an eval's results.jsonl, a tasks file)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line)["query"])
    return list(dict.fromkeys(out))[:n]


# -- worker: one code tree, one index copy ---------------------------------------------------
def worker(index_dir: Path, embedder: str | None) -> None:
    import sleuth
    from sleuth.embed import make_embedder

    index = sleuth.Index.open(index_dir, make_embedder(embedder) if embedder else None)
    agents = {p: sleuth.Agent(index, policy=p) for p in ("single-pass", "heuristic")}
    runs = Path(tempfile.mkdtemp(prefix="agent-speed-runs-"))
    print(json.dumps({"ready": sleuth.__file__}), flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        if "profile" in msg:
            print(json.dumps(profile(index, msg["profile"], runs)), flush=True)
            continue
        out: dict[str, Any] = {}
        for p, agent in agents.items():
            t0, c0, w0 = time.perf_counter(), time.process_time(), sched_wait()
            result = agent.search(msg["q"], trajectory=runs / f"{p}-{msg['i']}.jsonl")
            out[p] = time.perf_counter() - t0
            out[f"{p}_cpu"] = time.process_time() - c0
            out[f"{p}_wait"] = sched_wait() - w0
            out[f"{p}_docs"] = [d.id for d in result.documents]
            t = result.timings
            out[f"{p}_split"] = [t.policy_s, t.tools_s, t.harness_s, t.wall_s]
        print(json.dumps(out), flush=True)


def profile(index: Any, questions: list[str], runs: Path) -> dict[str, Any]:
    import cProfile
    import pstats

    import sleuth
    from sleuth.harness.loop import HarnessConfig

    agent = sleuth.Agent(index, harness=HarnessConfig(parallel_tools=False))
    prof = cProfile.Profile(time.process_time)  # CPU seconds: steadier than wall under load
    prof.enable()
    for i, q in enumerate(questions):
        agent.search(q, trajectory=runs / f"profile-{i}.jsonl")
    prof.disable()
    stats: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    n = len(questions)
    stages: dict[str, list[float]] = {}
    rows = []
    for (file, line, name), (_cc, calls, tt, ct, _callers) in stats.items():
        for stage, (suffix, fn) in STAGES.items():
            if name == fn and file.endswith(suffix):
                got = stages.setdefault(stage, [0.0, 0.0])
                got[0] += ct / n
                got[1] += calls / n
        short = f"{Path(file).parent.name}/{Path(file).name}:{line}:{name}"
        rows.append([short, round(calls / n, 1), round(tt / n, 4), round(ct / n, 4)])
    rows.sort(key=lambda r: -r[3])
    by_stage = {k: [round(stages[k][0], 4), round(stages[k][1], 1)] for k in STAGES if k in stages}
    return {"stages": by_stage, "top": rows[:40]}


# -- coordinator -----------------------------------------------------------------------------
def start(label: str, src: Path, index: Path, a: argparse.Namespace) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    cmd = [sys.executable, str(HERE), "--worker", "--index", str(index)]
    if a.embedder:
        cmd += ["--embedder", a.embedder]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    ready = json.loads(ask(proc, None))
    print(f"{label}: sleuth from {ready['ready']}", file=sys.stderr, flush=True)
    return proc


def ask(proc: subprocess.Popen[str], msg: dict[str, Any] | None) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    if msg is not None:
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("a worker died; its error is above")
    return line


def timed(
    procs: dict[str, subprocess.Popen[str]], qs: list[str], warmup: int
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Each question to every worker in turn (alternating which goes first): their replies
    after the warm-up, and the questions on which their final lists differ."""
    got: dict[str, list[dict[str, Any]]] = {t: [] for t in procs}
    differ = []
    for i, q in enumerate(qs):
        order = list(procs) if i % 2 == 0 else list(reversed(procs))
        replies = {t: json.loads(ask(procs[t], {"i": i, "q": q})) for t in order}
        if len({json.dumps(r["heuristic_docs"]) for r in replies.values()}) > 1:
            differ.append(q)
        if i >= warmup:
            for t, r in replies.items():
                got[t].append(r)
    return got, differ


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of one tree's replies: s/q of each policy, their ratio, the default's split."""
    sp = statistics.median(r["single-pass"] for r in rows)
    h = statistics.median(r["heuristic"] for r in rows)
    sp_cpu = statistics.median(r["single-pass_cpu"] for r in rows)
    h_cpu = statistics.median(r["heuristic_cpu"] for r in rows)
    return {
        "single_pass_s": sp,
        "default_s": h,
        "ratio": h / sp,
        "single_pass_cpu_s": sp_cpu,
        "default_cpu_s": h_cpu,
        "cpu_ratio": h_cpu / sp_cpu,
        "single_pass_wait_s": statistics.median(r.get("single-pass_wait", 0.0) for r in rows),
        "default_wait_s": statistics.median(r.get("heuristic_wait", 0.0) for r in rows),
        "median_of_ratios": statistics.median(r["heuristic"] / r["single-pass"] for r in rows),
        "default_policy_tools_harness_s": [
            statistics.median(r["heuristic_split"][k] for r in rows) for k in range(3)
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--questions", type=Path, help="JSONL with a query field (required)")
    ap.add_argument("-n", type=int, default=40, help="questions timed")
    ap.add_argument("--warmup", type=int, default=2, help="questions run first, not timed")
    ap.add_argument("--embedder", help="search with this embedder (same vector space)")
    ap.add_argument("--baseline-src", type=Path, help="another tree's src/ to compare with")
    ap.add_argument("--no-copy", action="store_true", help="open the index in place")
    ap.add_argument("--profile", type=int, default=0, help="cProfile this many more questions")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.index, a.embedder)
        return
    if a.questions is None:
        ap.error("--questions is required")
    qs = read_questions(a.questions, a.warmup + a.n + a.profile)
    trees = {"this": HERE.parents[1] / "src"}
    if a.baseline_src:
        trees = {"baseline": a.baseline_src.resolve(), **trees}
    tmp = Path(tempfile.mkdtemp(prefix="agent-speed-"))
    procs = {}
    for label, src in trees.items():
        index = a.index
        if not a.no_copy:  # opening may write (lock file, graph): never the caller's copy
            index = tmp / label
            shutil.copytree(a.index, index)
        procs[label] = start(label, src, index, a)
    load0 = os.getloadavg()[0]
    got, differ = timed(procs, qs[: a.warmup + a.n], a.warmup)
    report: dict[str, Any] = {"questions": a.n, "load": [load0, os.getloadavg()[0]], "trees": {}}
    print(f"\n{a.n} questions, {a.index} (load {load0:.1f})\n")
    print(
        "| code | single-pass s/q | default s/q | ratio | CPU s/q, single / default | CPU ratio "
        "| CPU wait s/q, single / default |"
    )
    print("|---|---|---|---|---|---|---|")
    for t, rows in got.items():
        report["trees"][t] = r = summary(rows)
        r["rows"] = rows
        print(
            f"| {t} | {r['single_pass_s']:.3f} | {r['default_s']:.3f} | {r['ratio']:.1f}x "
            f"| {r['single_pass_cpu_s']:.3f} / {r['default_cpu_s']:.3f} | {r['cpu_ratio']:.1f}x "
            f"| {r['single_pass_wait_s']:.3f} / {r['default_wait_s']:.3f} |"
        )
    for t in trees:
        split = " / ".join(f"{x:.3f}" for x in report["trees"][t]["default_policy_tools_harness_s"])
        print(f"default agent ({t}), policy / tools / harness s: {split}")
    if len(trees) > 1:
        for key, what in (("default_s", "time"), ("default_cpu_s", "CPU time")):
            b, n = (report["trees"][t][key] for t in trees)
            print(f"default agent, this / baseline: {n / b:.2f}x the {what}")
        print(f"final lists differ on {len(differ)} of {a.warmup + a.n} questions")
    report["differ"] = differ
    if a.profile:
        extra = qs[a.warmup + a.n :]
        for t, proc in procs.items():
            report["trees"][t]["profile"] = prof = json.loads(ask(proc, {"profile": extra}))
            print(f"\nprofile ({t}, {len(extra)} questions, tools in turn): CPU s/q, calls/q")
            for stage, (s, c) in prof["stages"].items():
                print(f"  {stage:36s} {s:7.4f}  {c:6.1f}")
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)
    if a.out:
        a.out.write_text(json.dumps(report, indent=1) + "\n")
    if differ:
        raise SystemExit(f"final ranked lists differ between the trees on {len(differ)} questions")


if __name__ == "__main__":
    main()
