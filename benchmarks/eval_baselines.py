"""The four baselines side by side on the HotpotQA, MuSiQue and 2WikiMultihopQA samples.

For each dataset the first ``--questions`` questions are taken and their context paragraphs are
pooled into one index (one document per Wikipedia title, embedded with the real
all-MiniLM-L6-v2), so every question's gold paragraphs compete with the distractors of all the
others. Each baseline runs through ``sleuth.eval.run_eval``, the same runner, harness and metrics
as any policy. The table lands in ``OUT/baselines.md``; indexes and eval folders are kept, so a
second run only re-runs what is missing (the eval runner resumes).

    python benchmarks/eval_baselines.py --questions 200 --out /tmp/sleuth-baselines
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sleuth.errors import IndexIncompleteError, InputError
from sleuth.eval import POLICY_NAMES, run_eval
from sleuth.index import Index
from sleuth.tasks import Task, read_2wiki, read_hotpotqa, read_musique
from sleuth.tools.toolbox import Toolbox

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATASETS = {
    "HotpotQA": (read_hotpotqa, SHARED / "hotpotqa_distractor_dev"),
    "MuSiQue": (read_musique, SHARED / "musique_ans_dev"),
    "2Wiki": (read_2wiki, SHARED / "2wikimultihopqa_dev"),
}
COLUMNS = {
    "final_answer_found": "found",
    "recall": "recall",
    "f1": "F1",
    "trajectory_recall": "traj. recall",
    "turns": "turns",
    "tool_calls_per_turn": "calls/turn",
}
console = Console(width=132)  # wide enough for the table when piped to a file


def build_index(name: str, n_questions: int, out: Path, embedder: str) -> tuple[list[Task], Index]:
    """The first ``n_questions`` tasks and an index of their pooled paragraphs (reused if built)."""
    reader, folder = DATASETS[name]
    docs, tasks = reader(folder)
    tasks = tasks[:n_questions]
    wanted = {d for t in tasks for d in [*t.gold_doc_ids, *t.distractor_doc_ids]}
    docs = [d for d in docs if d.id in wanted]
    path = out / "index"
    started = time.perf_counter()
    try:
        index = Index.open(path)
    except (InputError, IndexIncompleteError):  # not built yet, or interrupted: (re)ingest
        Index.create(path, embedder=embedder).ingest(docs)
        index = Index.open(path)
    took = time.perf_counter() - started
    console.print(
        f"{name}: {len(tasks)} questions, {len(docs)} documents, {len(index)} chunks "
        f"(index ready in {took:.0f} s)"
    )
    return tasks, index


def evaluate(tasks: list[Task], index: Index, out: Path, concurrency: int) -> dict:
    """Overall aggregates of every baseline on one dataset, plus seconds per query."""
    toolbox = Toolbox(index)
    rows = {}
    for policy in POLICY_NAMES:
        started = time.perf_counter()
        summary = run_eval(tasks, policy, toolbox, out / policy, concurrency=concurrency)
        took = time.perf_counter() - started
        rows[policy] = summary["overall"] | {"s_per_query": took / max(len(tasks), 1)}
    return rows


def render(results: dict[str, dict[str, dict]]) -> tuple[Table, str]:
    """One rich table and the same as Markdown: a row per (dataset, baseline)."""
    headers = ["dataset", "baseline", *COLUMNS.values(), "s/query"]
    table = Table(*headers, title="Baselines (mean over questions)")
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for dataset, rows in results.items():
        for policy, agg in rows.items():
            cells = [dataset, policy, *(f"{agg[k]:.3f}" for k in COLUMNS)]
            cells.append(f"{agg['s_per_query']:.2f}")
            table.add_row(*cells)
            lines.append("| " + " | ".join(cells) + " |")
    return table, "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=200, help="questions per dataset")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sleuth-baselines"))
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    console.print(f"[bold]{command}[/bold]")
    started = time.perf_counter()
    results = {}
    for name in DATASETS:
        root = args.out / f"{name}-{args.questions}"
        tasks, index = build_index(name, args.questions, root, args.embedder)
        results[name] = evaluate(tasks, index, root, args.concurrency)
    table, markdown = render(results)
    console.print(table)
    total = time.perf_counter() - started
    note = f"\n`{command}` ({args.embedder} embedder, {total / 60:.1f} min on this machine)\n"
    (args.out / "baselines.md").write_text(markdown + note, encoding="utf-8")
    console.print(f"Markdown: {args.out / 'baselines.md'}; total {total / 60:.1f} min")


if __name__ == "__main__":
    main()
