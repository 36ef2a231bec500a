"""Retrieval quality the field recognises: Recall@2/5/10 and all-gold@5 on pooled corpora.

Protocol (HippoRAG, arXiv 2405.14831 §3): every paragraph of a dataset's questions, gold and
distractor, is pooled into one index (one document per Wikipedia title, real all-MiniLM-L6-v2),
and Recall@k is the share of gold documents among the first k of the policy's final ranked list.
Datasets: the staged HotpotQA (both files, 298 questions), MuSiQue and 2Wiki samples, and
``combined``: one index of all three samples' paragraphs (more distractors), each dataset's
questions run against it. Every policy runs through ``sleuth.eval.run_eval`` (harness, runner,
metrics as for any policy). Questions a trained component saw (``--train-ids``, by default the
shipped ranker file, which lists them) are never evaluated; the corpus still holds their paragraphs.

Per row: the means over questions, the 95% bootstrap interval of R@5, and, per dataset, R@5 of
the policy minus single-pass with a paired-bootstrap 95% interval. Indexes (``OUT/index``) and
eval folders (``OUT/<dataset>/<policy>``) are reused, so a rerun only runs what is missing.

    python benchmarks/quality.py --policies single-pass,heuristic --out /tmp/sleuth-quality
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sleuth.corpus import Document
from sleuth.errors import InputError, SleuthError
from sleuth.eval import EvalConfig, load_results, run_eval
from sleuth.eval.aggregate import bootstrap_interval, mean_defined, paired_bootstrap_difference
from sleuth.index import Index
from sleuth.policies import parse_policy_spec
from sleuth.policies.baselines import POLICY_NAMES
from sleuth.policies.spec import SCRIPTED
from sleuth.tasks import Task, read_benchmark
from sleuth.tools.toolbox import Toolbox
from sleuth.train.recipes.data import STAGED, open_index

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TRAIN_IDS = (
    Path(__file__).resolve().parents[1] / "src" / "sleuth" / "data" / "ranker" / "ranker.json"
)
# name -> (reader, folder, the ``Task.source`` its tasks carry): the recipe's staged samples
DATASETS: dict[str, tuple[Callable[[Any], Any], Path, str]] = {
    name: (reader, SHARED / folder, source) for name, (reader, folder, source) in STAGED.items()
}
COMBINED = "combined"
BASELINE = "single-pass"
METRICS = {
    "recall_at_2": "R@2",
    "recall_at_5": "R@5",
    "recall_at_10": "R@10",
    "all_gold_at_5": "all gold@5",
    "final_answer_found": "found",
    "trajectory_recall": "traj. recall",
}
# HippoRAG 2 (arXiv 2502.14802, Table 3), pooled corpora of 1,000 questions (~6-12k passages):
# R@5 in %, per dataset. Digest: ../shared/research/anchors-2026-11-30.md §1.2.
ANCHORS_R5 = {
    "BM25": {"MuSiQue": 43.5, "2Wiki": 65.3, "HotpotQA": 74.8},
    "NV-Embed-v2 (7B)": {"MuSiQue": 69.7, "2Wiki": 76.5, "HotpotQA": 94.5},
    "HippoRAG 2": {"MuSiQue": 74.7, "2Wiki": 90.4, "HotpotQA": 96.3},
}
console = Console(width=160)  # wide enough for the table when piped to a file


@dataclass(frozen=True)
class Corpus:
    """One index's documents and the questions asked against it, keyed by dataset name."""

    name: str
    docs: list[Document]
    tasks: dict[str, list[Task]]


def load_corpus(name: str) -> Corpus:
    """A dataset's pooled paragraphs and all its questions; ``combined`` pools all three."""
    if name == COMBINED:
        docs, tasks = read_benchmark([folder for _, folder, _ in DATASETS.values()])
        by_source = {source: ds for ds, (_, _, source) in DATASETS.items()}
        grouped = {ds: [t for t in tasks if by_source.get(t.source) == ds] for ds in DATASETS}
        return Corpus(name, docs, grouped)
    reader, folder, _ = DATASETS[name]
    docs, tasks = reader(folder)
    return Corpus(name, docs, {name: tasks})


def read_train_ids(path: Path | None) -> set[str]:
    """Task ids a trained component saw (``{"question_ids": [...]}``); none without a file.

    Raises:
        InputError: the file cannot be read or lacks a list of ids.
    """
    if path is None:
        return set()
    try:
        ids = json.loads(path.read_text(encoding="utf-8")).get("question_ids")
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(f"cannot read training ids ({e})", source=str(path)) from e
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise InputError('expected {"question_ids": [list of task ids]}', source=str(path))
    return set(ids)


def held_out(tasks: Sequence[Task], train_ids: set[str], limit: int | None) -> list[Task]:
    """The first ``limit`` tasks that no trained component saw."""
    kept = [t for t in tasks if t.id not in train_ids]
    return kept if limit is None else kept[:limit]


def policy_records(
    tasks: Sequence[Task], policy: str, toolbox: Toolbox, out: Path, concurrency: int
) -> list[dict[str, Any]]:
    """Run (or resume) ``policy`` on ``tasks``; their records in task order."""
    run_eval(tasks, policy, toolbox, out, EvalConfig(concurrency=concurrency, progress=False))
    finished = load_results(out / "results.jsonl")
    return [finished[t.id] for t in tasks]


def row(dataset: str, policy: str, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions, seconds per query and the bootstrap interval of R@5."""
    metrics = [r["metrics"] for r in records]
    out: dict[str, Any] = {"dataset": dataset, "policy": policy, "n": len(records)}
    for key in METRICS:
        out[key] = mean_defined(m[key] for m in metrics)
    out["s_per_query"] = mean_defined(m["wall_time_s"] for m in metrics)
    out["r5_ci"] = list(bootstrap_interval([m["recall_at_5"] for m in metrics]))
    return out


def add_deltas(rows: list[dict[str, Any]], r5_by_row: dict[tuple[str, str], list[float]]) -> None:
    """``delta_r5`` (policy − single-pass R@5) and its paired-bootstrap interval, per dataset."""
    for r in rows:
        base = r5_by_row.get((r["dataset"], BASELINE))
        if base is None or r["policy"] == BASELINE:
            r["delta_r5"] = r["delta_r5_ci"] = None
            continue
        diff, interval = paired_bootstrap_difference(r5_by_row[(r["dataset"], r["policy"])], base)
        r["delta_r5"], r["delta_r5_ci"] = diff, list(interval)


def evaluate(
    corpus: Corpus,
    index: Index,
    policies: Sequence[str],
    out: Path,
    *,
    train_ids: set[str],
    limit: int | None,
    concurrency: int,
) -> list[dict[str, Any]]:
    """One row per (dataset of the corpus, policy); a combined corpus names rows ``combined/X``."""
    toolbox = Toolbox(index)
    asked = {ds: held_out(tasks, train_ids, limit) for ds, tasks in corpus.tasks.items()}
    everything = [t for tasks in asked.values() for t in tasks]
    rows, r5 = [], {}
    for policy in policies:
        t0 = time.perf_counter()
        records = policy_records(everything, policy, toolbox, out / policy, concurrency)
        console.print(f"  {corpus.name} {policy}: {time.perf_counter() - t0:.0f} s")
        by_id = {r["task_id"]: r for r in records}
        for ds, tasks in asked.items():
            label = f"{COMBINED}/{ds}" if corpus.name == COMBINED else ds
            mine = [by_id[t.id] for t in tasks]
            trained = sum(t.id in train_ids for t in corpus.tasks[ds])
            rows.append(row(label, policy, mine) | {"excluded": trained})
            r5[(label, policy)] = [m["metrics"]["recall_at_5"] for m in mine]
    add_deltas(rows, r5)
    return rows


# ---- rendering ----------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _interval(ci: Sequence[float] | None) -> str:
    return "–" if ci is None else f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _delta(r: dict[str, Any]) -> str:
    if r["delta_r5"] is None:
        return "–"
    return f"{100 * r['delta_r5']:+.1f} {_interval(r['delta_r5_ci'])}"


HEADERS = ["dataset", "policy", "n", *METRICS.values(), "R@5 95% CI", "ΔR@5 vs single-pass", "s/q"]


def cells(r: dict[str, Any]) -> list[str]:
    """A row's table cells: metrics in %, intervals in brackets, seconds per query."""
    values = [_pct(r[k]) for k in METRICS]
    seconds = "–" if r["s_per_query"] is None else f"{r['s_per_query']:.2f}"
    return [
        r["dataset"],
        r["policy"],
        str(r["n"]),
        *values,
        _interval(r["r5_ci"]),
        _delta(r),
        seconds,
    ]


def anchor_lines() -> list[str]:
    """The published R@5 anchors as a Markdown table."""
    names = ["MuSiQue", "2Wiki", "HotpotQA"]
    lines = ["| anchor (HippoRAG 2, arXiv 2502.14802) | " + " | ".join(names) + " |"]
    lines.append("|---" * (len(names) + 1) + "|")
    for method, scores in ANCHORS_R5.items():
        lines.append(f"| {method} | " + " | ".join(f"{scores[n]:.1f}" for n in names) + " |")
    return lines


def markdown(rows: Sequence[dict[str, Any]], header: str) -> str:
    """The table (metrics in %), the anchors beside it, and the header line."""
    lines = [header, "", "| " + " | ".join(HEADERS) + " |", "|---" * len(HEADERS) + "|"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    lines += ["", "Published R@5 anchors (pooled corpora of 1,000 questions, ~6-12k passages):", ""]
    return "\n".join(lines + anchor_lines()) + "\n"


def header_line(rows: Sequence[dict[str, Any]]) -> str:
    """How many questions were evaluated and how many were excluded as training questions."""
    plain = [r for r in rows if not r["dataset"].startswith(f"{COMBINED}/")] or rows
    per_dataset = {r["dataset"]: (r["n"], r["excluded"]) for r in plain}
    parts = [f"{ds} {n} evaluated, {x} excluded" for ds, (n, x) in per_dataset.items()]
    return "Held-out questions only (training questions excluded): " + "; ".join(parts) + "."


def rich_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(*HEADERS, title=title)
    for r in rows:
        table.add_row(*cells(r))
    return table


# ---- command line -------------------------------------------------------------------------


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise InputError(f"unknown {what} {unknown or text!r}; choose from {', '.join(known)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parsed and checked arguments (checked before anything is written).

    Raises:
        InputError: an unknown dataset or policy, a bad count, or an unreadable ids file.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default=",".join([*DATASETS, COMBINED]))
    parser.add_argument("--policies", default=",".join(POLICY_NAMES))
    parser.add_argument("--questions", type=int, default=None, help="per dataset (default all)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-quality"))
    parser.add_argument("--json", type=Path, default=None, help="default OUT/quality.json")
    parser.add_argument("--train-ids", type=Path, default=TRAIN_IDS if TRAIN_IDS.exists() else None)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args(argv)
    args.datasets = _names(args.datasets, [*DATASETS, COMBINED], "dataset")
    args.policies = _names(args.policies, list(SCRIPTED), "policy")
    for policy in args.policies:
        parse_policy_spec(policy)
    if args.questions is not None and args.questions < 1:
        raise InputError(f"--questions ({args.questions}) must be at least 1")
    if args.concurrency < 1:
        raise InputError(f"--concurrency ({args.concurrency}) must be at least 1")
    args.train = read_train_ids(args.train_ids)
    return args


def dataset_rows(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Build or reuse the dataset's index, then evaluate every policy on it."""
    corpus = load_corpus(name)
    started = time.perf_counter()
    index = open_index(args.out / "index" / f"{name}-{args.embedder}", corpus.docs, args.embedder)
    took = time.perf_counter() - started
    console.print(f"{name}: {len(corpus.docs)} documents, {len(index)} chunks ({took:.0f} s)")
    return evaluate(
        corpus,
        index,
        args.policies,
        args.out / name,
        train_ids=args.train,
        limit=args.questions,
        concurrency=args.concurrency,
    )


def run(args: argparse.Namespace) -> None:
    """Every dataset, then the table on the console, in ``OUT/quality.md`` and in the JSON."""
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    console.print(f"[bold]{command}[/bold]")
    started, rows = time.perf_counter(), []
    for name in args.datasets:
        rows += dataset_rows(name, args)
        console.print(rich_table(rows, "so far"))
    header = header_line(rows)
    console.print(rich_table(rows, "Retrieval quality (%, mean over questions)"))
    console.print(header)
    console.print("\n".join(anchor_lines()))
    minutes = (time.perf_counter() - started) / 60
    note = f"\n`{command}` ({args.embedder}, train ids: {args.train_ids}, {minutes:.1f} min)\n"
    (args.out / "quality.md").write_text(markdown(rows, header) + note, encoding="utf-8")
    json_path = args.json or args.out / "quality.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({"command": command, "header": header, "rows": rows}, indent=2))
    console.print(f"Markdown: {args.out / 'quality.md'}; JSON: {json_path}; {minutes:.1f} min")


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0, or 2 after one line on stderr for bad input."""
    try:
        run(parse_args(argv))
    except SleuthError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
