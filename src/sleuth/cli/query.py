"""``sleuth run``, ``sleuth score``, ``sleuth eval``: the subagent on one query, one trajectory scored, a task set evaluated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import sleuth.cli.common as common
from sleuth.cli.common import (
    DEFAULT_REPLY_TOKENS,
    AdapterOpt,
    ApiKeyOpt,
    BaseUrlOpt,
    EngineOpt,
    FormatOpt,
    IndexOpt,
    JsonOpt,
    ModelOpt,
    PolicyOpt,
    RankerOpt,
    ReplyTokensOpt,
    TextStageOpt,
    _harness_config,
    app,
    at_least,
    chosen_policy,
    cli_errors,
    console,
)
from sleuth.errors import InputError, RunFailedError
from sleuth.harness.budget import BUDGET_TOKENS, MAX_TURNS
from sleuth.metrics import BETA

if TYPE_CHECKING:
    from sleuth.eval.records import EvalSummary


@app.command()
@cli_errors
def run(
    query: str,
    index: IndexOpt,
    policy: PolicyOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = "EMPTY",
    fmt: FormatOpt = "chat",
    adapter: AdapterOpt = None,
    engine: EngineOpt = "auto",
    ranker: RankerOpt = None,
    text_stage: TextStageOpt = None,
    budget: Annotated[int, typer.Option(help="Token budget T.")] = BUDGET_TOKENS,
    max_turns: Annotated[int, typer.Option(help="Maximum turns.")] = MAX_TURNS,
    max_reply_tokens: ReplyTokensOpt = DEFAULT_REPLY_TOKENS,
    trajectory: Annotated[
        Path | None, typer.Option(help="Write the trajectory JSONL here.")
    ] = None,
    reranker: Annotated[
        str | None, typer.Option(help="none | cross-encoder:PATH | endpoint:MODEL@URL")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the subagent on one query: ranked documents (+ the trajectory file)."""
    from sleuth.api import Agent
    from sleuth.io import check_file_target

    at_least(max_reply_tokens, 1, "--max-reply-tokens")
    at_least(budget, 1, "--budget")
    at_least(max_turns, 1, "--max-turns")
    if trajectory is not None:
        check_file_target(trajectory, "--trajectory")
    if model and not base_url and not Path(model).exists():
        raise InputError(
            f"--model {model}: no such local model file or folder (or give --base-url)"
        )
    config = _harness_config(budget, max_turns, max_reply_tokens)
    tools = common.open_toolbox(index, reranker)
    built = chosen_policy(
        policy,
        model,
        base_url,
        fmt,
        api_key,
        adapter,
        engine=engine,
        ranker=ranker,
        text_stage=text_stage,
    )
    result = Agent(tools, built, harness=config).search(query, trajectory=trajectory)
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
    if result.stop_reason == "policy_error":
        never = "never answered" if result.turns == 0 else f"failed after {result.turns} turn(s)"
        raise RunFailedError(
            f"the policy {never}: {result.error}; trajectory written to {result.trajectory}"
        )
    if as_json:
        return
    for d in result.documents:
        console.print(f"[bold]{d.rank:>2}. {d.id}[/bold]  {d.justification}")
    console.print(
        f"{result.turns} turns, {result.tool_calls} tool calls, peak {result.peak_tokens} "
        f"tokens; trajectory: {result.trajectory}"
    )


@app.command()
@cli_errors
def score(
    task: Annotated[Path, typer.Option(help="Task JSONL (one task, or pick with --task-id).")],
    trajectory: Annotated[Path, typer.Option(help="Trajectory JSONL written by the harness.")],
    beta: Annotated[float, typer.Option(help="β of F_β.")] = BETA,
    task_id: Annotated[
        str | None, typer.Option(help="Task id when the file holds several.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every metric and every reward term of one trajectory."""
    from sleuth.eval import score_files

    for path, option in ((task, "--task"), (trajectory, "--trajectory")):
        if path.is_dir():
            raise InputError(f"{option} is a folder; give a JSONL file", source=str(path))
    result = score_files(task, trajectory, beta=beta, task_id=task_id)
    scores = result.model_dump()
    if as_json:
        print(json.dumps(scores))
        return
    for section in ("metrics", "reward"):
        console.print(f"[bold]{section}[/bold]")
        for k, v in scores[section].items():
            console.print(f"  {k}: {v:.4f}" if isinstance(v, float) else f"  {k}: {v}")


@app.command("eval")
@cli_errors
def eval_cmd(
    index: IndexOpt,
    tasks: Annotated[Path, typer.Option(help="Task JSONL (SPEC §8).")],
    out: Annotated[Path, typer.Option(help="Output folder; rerun with it to resume.")],
    policy: PolicyOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = "EMPTY",
    fmt: FormatOpt = "chat",
    adapter: AdapterOpt = None,
    engine: EngineOpt = "auto",
    ranker: RankerOpt = None,
    text_stage: TextStageOpt = None,
    rollouts: Annotated[int, typer.Option(help="Rollouts per query, fused (the report's 4x).")] = 1,
    fuse: Annotated[str, typer.Option(help="Fusion of rollouts.")] = "rrf",
    concurrency: Annotated[int, typer.Option(help="Queries run at once.")] = 4,
    budget: Annotated[int, typer.Option(help="Token budget T.")] = BUDGET_TOKENS,
    max_turns: Annotated[int, typer.Option(help="Maximum turns.")] = MAX_TURNS,
    max_reply_tokens: ReplyTokensOpt = DEFAULT_REPLY_TOKENS,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    beta: Annotated[float, typer.Option(help="β of F_β.")] = BETA,
    retry_failed: Annotated[
        bool, typer.Option(help="Rerun queries whose every rollout failed.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a task set (resumable, concurrent); write per-query JSONL, summary, plots, HTML."""
    from sleuth.api import EvalConfig, evaluate
    from sleuth.io import check_folder_target
    from sleuth.tasks import load_tasks

    at_least(limit, 1, "--limit")
    at_least(max_reply_tokens, 1, "--max-reply-tokens")
    at_least(budget, 1, "--budget")
    at_least(max_turns, 1, "--max-turns")
    check_folder_target(out, "--out")
    eval_config = EvalConfig(
        concurrency=concurrency,
        rollouts=rollouts,
        fuse=fuse,
        harness_config=_harness_config(budget, max_turns, max_reply_tokens),
        beta=beta,
        retry_failed=retry_failed,
        progress=console.is_terminal,  # a bar in a log is noise around the one error line
    )
    task_list = load_tasks(tasks)[:limit]
    if not task_list:
        raise InputError(
            "holds no tasks; give a task JSONL with one task per line", source=str(tasks)
        )
    built = chosen_policy(
        policy,
        model,
        base_url,
        fmt,
        api_key,
        adapter,
        engine=engine,
        ranker=ranker,
        text_stage=text_stage,
    )
    summary = evaluate(
        task_list,
        index=common.open_toolbox(index),
        out=out,
        policy=built,
        config=eval_config,
    )
    _fail_if_all_failed(summary, out)
    if as_json:
        print(json.dumps(summary.model_dump()))
    else:
        print((Path(out) / "summary.md").read_text())
        console.print(f"report: {Path(out) / 'report.html'}")


def _fail_if_all_failed(summary: EvalSummary, out: Path) -> None:
    """An eval whose every query failed (an endpoint that never answered) has failed."""
    overall = summary.overall
    if overall["count"] and overall["failed_count"] == overall["count"]:
        from sleuth.eval.records import read_records
        from sleuth.eval.runner import RESULTS

        first = next((r.error for r in read_records(Path(out) / RESULTS)), None)
        raise RunFailedError(
            f"every query failed ({overall['count']} of {overall['count']}), e.g. {first}; "
            f"records in {Path(out) / RESULTS}"
        )
