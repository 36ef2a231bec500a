"""Run a task set with any policy through the harness: concurrent, resumable, then reported.

Layout of the output folder::

    run.json           what is being run (policy, rollouts, fusion, β); checked on resume
    .sleuth.lock       one eval writes here at a time (a second one is refused)
    results.jsonl      one record per finished query, appended with fsync as queries finish
    trajectories/      one trajectory JSONL per rollout (or ``trajectories_dir``)
    summary.json       aggregates overall and by hop level, domain and source
    summary.md, *.png, report.html      see :mod:`sleuth.eval.report`

Resuming: a query with a record in ``results.jsonl`` is never run again (the last record of an
id wins; a torn last line from a crash is cut off before appending). A query whose every
rollout failed (policy error, endpoint down) has a record too, so it counts in the summary; pass
``retry_failed=True`` to run those again. An exception that escapes the harness (a crash, Ctrl-C)
stops the run: queued queries are cancelled, and finished ones stay recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from sleuth.errors import ConfigError, InputError
from sleuth.eval.aggregate import summarize
from sleuth.eval.fusion import FUSERS, RRF_K, score_rollouts
from sleuth.eval.records import (
    CHECKED,
    RECORD_SCHEMA_VERSION,
    EvalSummary,
    QueryRecord,
    RunInfo,
    checked,
    read_json_record,
    read_records,
)
from sleuth.eval.report import write_report
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.io import (
    append_jsonl,
    atomic_write_text,
    check_folder_target,
    folder_lock,
)
from sleuth.metrics import BETA, check_beta
from sleuth.policies.spec import BuiltPolicy, PolicyFactory, build_policy
from sleuth.tasks.schema import Task
from sleuth.tools.base import Tools

RESULTS = "results.jsonl"
RUN_INFO = "run.json"
SUMMARY = "summary.json"


@dataclass(frozen=True)
class _Job:
    """What every query of one eval shares."""

    make_policy: PolicyFactory
    tools: Tools
    harness: HarnessConfig
    out_dir: Path
    trajectories_dir: Path
    rollouts: int
    beta: float
    rrf_k: int


@dataclass(frozen=True)
class EvalConfig:
    """How :func:`run_eval` runs a task set; checked when built (a :class:`ConfigError` names
    the setting to fix)."""

    concurrency: int = 4
    """Queries run at the same time (rollouts of one query run in turn)."""
    rollouts: int = 1
    """Runs per query; above 1 their final lists are fused (``fuse``)."""
    fuse: str = "rrf"
    """The fusion of rollouts; only ``rrf`` (k = ``rrf_k``)."""
    trajectories_dir: str | Path | None = None
    """Where trajectory files go (default ``out_dir/trajectories``)."""
    harness_config: HarnessConfig | None = None
    """Budget and loop settings for every run (a spec's policy adds what it needs, e.g. a
    trained adapter's settings)."""
    beta: float = BETA
    """β of F_β in the metrics and the reward."""
    rrf_k: int = RRF_K
    """RRF constant of the rollout fusion."""
    retry_failed: bool = False
    """Run again the queries whose every rollout failed."""
    progress: bool = True
    """Show a progress bar."""
    label: str | None = None
    """The policy's name in ``run.json`` and the reports (default: the spec, else the factory's
    ``__name__``); a resumed run must keep it."""

    def __post_init__(self) -> None:
        # checked before ``run.json`` is written: a stored NaN β would never match on resume
        check_beta(self.beta)
        if self.rrf_k < 1:
            raise ConfigError(f"rrf_k ({self.rrf_k}) must be at least 1")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency ({self.concurrency}) must be at least 1")
        if self.rollouts < 1:
            raise ConfigError(f"rollouts ({self.rollouts}) must be at least 1")
        if self.fuse not in FUSERS:
            raise ConfigError(f"unknown fusion {self.fuse!r}; choose one of {', '.join(FUSERS)}")


def run_eval(
    tasks: Sequence[Task],
    policy: str | BuiltPolicy | PolicyFactory,
    tools: Tools,
    out_dir: str | Path,
    config: EvalConfig | None = None,
) -> EvalSummary:
    """Evaluate ``policy`` on ``tasks``; returns the summary (also written to ``summary.json``).

    Args:
        tasks: the task set (ids unique).
        policy: a policy spec (``single-pass``, ``bm25``, ``heuristic``, ``openai:MODEL@URL``...;
            see :mod:`sleuth.policies.spec`), a built one, or a seed -> fresh policy function
            (called once per rollout with the rollout's index).
        tools: the retrieval tools (a ``Toolbox``; ``bm25``/``dense`` wrap it).
        out_dir: where results, trajectories and reports go; rerun with it to resume.
        config: the settings (:class:`EvalConfig`; default: its defaults).

    Raises:
        InputError: bad settings (``ConfigError``), or ``out_dir`` holds a run with other settings.
        BusyError: another process is writing ``out_dir``.
    """
    cfg = config or EvalConfig()
    if not tasks:
        raise InputError("no tasks to run: give a task file with at least one task")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise InputError("task ids must be unique")
    out = Path(out_dir)
    check_folder_target(out, "--out")
    built = build_policy(policy) if isinstance(policy, str) else policy
    label = cfg.label
    if label is None:
        label = (
            built.label if isinstance(built, BuiltPolicy) else getattr(policy, "__name__", "custom")
        )
    settings = {"schema_version": RECORD_SCHEMA_VERSION, "policy": label, "rollouts": cfg.rollouts}
    settings |= {
        "fuse": cfg.fuse if cfg.rollouts > 1 else None,
        "rrf_k": cfg.rrf_k,
        "beta": cfg.beta,
    }
    run = checked(RunInfo, settings, str(out / RUN_INFO))
    if isinstance(built, BuiltPolicy):
        tools, make_policy = built.for_tools(tools)
        harness = built.harness(cfg.harness_config)
    else:
        make_policy, harness = built, cfg.harness_config or HarnessConfig()
    trajectories = Path(cfg.trajectories_dir) if cfg.trajectories_dir else out / "trajectories"
    job = _Job(
        make_policy=make_policy,
        tools=tools,
        harness=harness,
        out_dir=out,
        trajectories_dir=trajectories,
        rollouts=cfg.rollouts,
        beta=cfg.beta,
        rrf_k=cfg.rrf_k,
    )
    with folder_lock(out, "this eval run"):  # a second eval into it would mix the records
        finished = load_results(out / RESULTS)  # checked before anything is written
        _claim(out, run)
        _cut_torn_tail(out / RESULTS)
        todo = [t for t in tasks if _needs_run(finished.get(t.id), cfg.retry_failed)]
        _run_all(job, todo, finished, cfg.concurrency, cfg.progress, total=len(tasks))
        records = [finished[t.id] for t in tasks if t.id in finished]
        summary = summarize(records, run)
        atomic_write_text(out / SUMMARY, json.dumps(summary.model_dump(), indent=2))
        write_report(out, summary, records)
    return summary


def load_results(path: Path) -> dict[str, QueryRecord]:
    """The finished records of a ``results.jsonl`` by task id: the last one wins, a torn last
    line is skipped, an absent file has none.

    Raises:
        InputError: a line is not a record (or is of a newer ``schema_version``).
    """
    if not path.exists():
        return {}
    return {record.task_id: record for record in read_records(path)}


def _run_task(task: Task, job: _Job) -> QueryRecord:
    """Run every rollout of one query and build its record."""
    paths = [_trajectory_path(job, task.id, r) for r in range(job.rollouts)]
    runs = [
        Harness(job.tools, job.make_policy(seed), job.harness).run(task.query, trajectory_path=p)
        for seed, p in enumerate(paths)
    ]
    summaries = [t.summary() for t in runs]
    scored = score_rollouts(task, summaries, job.beta, job.rrf_k)
    record = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "task_id": task.id,
        "query": task.query,
        "hops": task.hops,
        "domain": task.domain,
        "source": task.source,
        "policy": runs[0].policy,
        "rollouts": job.rollouts,
        **dict(scored),
        "gold_doc_ids": task.gold_doc_ids,
        "trajectories": [_relative(p, job.out_dir) for p in paths],
        "stop_reasons": [t.stop_reason and t.stop_reason.value for t in runs],
        "error": summaries[0].error if all(s.error for s in summaries) else None,
        "turn_tool_calls": [[len(turn.tool_events) for turn in t.turns] for t in runs],
        "turn_tokens": [[turn.prompt_tokens for turn in t.turns] for t in runs],
    }
    return checked(QueryRecord, record, str(job.out_dir / RESULTS))


def _run_all(
    job: _Job,
    todo: list[Task],
    finished: dict[str, QueryRecord],
    concurrency: int,
    show: bool,
    total: int,
) -> None:
    """Run ``todo`` on a bounded pool; the main thread alone appends records, in finish order."""
    results = job.out_dir / RESULTS
    columns = [*Progress.get_default_columns()[:1], BarColumn(), MofNCompleteColumn()]
    console = Console(stderr=True)  # stdout stays clean for `sleuth eval --json`
    with Progress(*columns, TimeRemainingColumn(), console=console, disable=not show) as bar:
        task_bar = bar.add_task("eval", total=total, completed=total - len(todo))
        pool = ThreadPoolExecutor(concurrency, thread_name_prefix="sleuth-eval")
        try:
            futures = [pool.submit(_run_task, task, job) for task in todo]
            for future in as_completed(futures):
                record = future.result()  # a crash inside a run stops the eval here
                append_jsonl(results, record.model_dump())
                finished[record.task_id] = record
                bar.advance(task_bar)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _claim(out: Path, run: RunInfo) -> None:
    """Record the settings, or check them against those of the run being resumed."""
    path = out / RUN_INFO
    if path.exists():
        before = read_json_record(RunInfo, path)
        changed = [k for k in CHECKED if getattr(before, k) != getattr(run, k)]
        if changed:
            was = ", ".join(f"{k}={getattr(before, k)!r}" for k in changed)
            raise InputError(
                f"holds a run with {was}; resume with those or use another --out", source=str(out)
            )
        return
    atomic_write_text(path, json.dumps(run.model_dump(), indent=2))


def _needs_run(record: QueryRecord | None, retry_failed: bool) -> bool:
    return record is None or (retry_failed and record.error is not None)


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline (a crash mid-append), so appends stay line-aligned."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def _trajectory_path(job: _Job, task_id: str, rollout: int) -> Path:
    suffix = f".r{rollout}" if job.rollouts > 1 else ""
    return job.trajectories_dir / f"{_file_stem(task_id)}{suffix}.jsonl"


def _file_stem(task_id: str) -> str:
    """A safe file name for a task id; a hash keeps ids that differ only in odd characters apart."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id)[:80]
    if stem == task_id:
        return stem
    return f"{stem}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


def _relative(path: Path, root: Path) -> str:
    """Paths inside the output folder are stored relative to it, so the folder can move."""
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path.resolve())
