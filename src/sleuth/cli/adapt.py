"""``sleuth adapt``: fit the learned selector to an index's corpus and store it in the index."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, app, cli_errors, console, progress_bar

if TYPE_CHECKING:
    from sleuth.train.adapt import AdaptReport

_ROWS = {"single-pass": "single-pass", "shipped": "shipped ranker", "adapted": "adapted ranker"}


@app.command()
@cli_errors
def adapt(
    index: IndexOpt,
    tasks: Annotated[
        int | None,
        typer.Option(
            help="Tasks to generate over the corpus; half train, half held out (default: the config's)."
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Random seed of the generated tasks (default: the config's).")
    ] = None,
    out_tasks: Annotated[
        Path | None,
        typer.Option(help="Also write the generated tasks here (JSONL, each with its 'split')."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Store the adapted ranker even if it loses on held-out tasks.")
    ] = False,
    learner: Annotated[
        str | None,
        typer.Option(
            help="Selection head: linear | gbdt (LambdaRank trees); default: the config's."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Generate tasks over the index's corpus, train the learned selector on half, compare it on
    the other half, and store it in the index: run, eval, serve and the Python API then use it
    (--ranker FILE or --ranker shipped overrides). Resumable."""
    from sleuth.api import Index
    from sleuth.io import check_file_target
    from sleuth.train.adapt import AdaptConfig

    given = {k: v for k, v in {"tasks": tasks, "seed": seed}.items() if v is not None}
    config = AdaptConfig(**given, force=force, learner=learner)  # checked before any work
    if out_tasks is not None:
        check_file_target(out_tasks, "--out-tasks")
    opened = Index.open(index)
    with progress_bar() as bar:
        shown = bar.add_task("adapting", total=None)

        def report(phase: str, done: int, total: int) -> None:
            bar.update(shown, description=phase, completed=done, total=total)

        result = opened.adapt(
            config.tasks, seed=config.seed, force=force, learner=learner, progress=report
        )
    if out_tasks is not None:
        _write_split(Path(result.tasks_file), out_tasks)
    if as_json:
        print(result.model_dump_json())
        return
    _print(result)


def _write_split(source: Path, out: Path) -> None:
    from sleuth.tasks import load_tasks, save_tasks
    from sleuth.tasks.split import is_heldout

    tasks = load_tasks(source)
    labelled = [
        t.model_copy(update={"split": "heldout" if is_heldout(t.id) else "train"}) for t in tasks
    ]
    save_tasks(out, labelled)


def _print(result: AdaptReport) -> None:
    console.print(
        f"{result.generated} tasks generated over {result.index}: {result.train_tasks} trained "
        f"the selector, {result.heldout_tasks} held out",
        markup=False,
        highlight=False,
    )
    if result.shortfall:
        console.print(f"note: {result.shortfall}", markup=False, highlight=False)
    print("held-out generated tasks | R@2 | R@5 | found | ΔR@5 vs single-pass [95% CI]")
    for name, label in _ROWS.items():
        score = result.heldout[name]
        label = f"{label} ({result.learner})" if name == "adapted" else label
        mean = score.mean
        delta = score.delta.get("recall_at_5")
        d = f"{delta[0]:+.3f} [{delta[1]:+.3f}, {delta[2]:+.3f}]" if delta else "-"
        print(
            f"{label} | {mean['recall_at_2']:.3f} | {mean['recall_at_5']:.3f} | "
            f"{mean['final_answer_found']:.3f} | {d}"
        )
    if result.installed:
        console.print(f"adapted ranker stored: {result.ranker}", markup=False, highlight=False)
    else:
        console.print(
            "the adapted ranker did worse than the shipped one on held-out tasks: not stored "
            "(the shipped ranker stays; --force stores it anyway)",
            markup=False,
            highlight=False,
        )
