"""``sleuth datagen offline`` and the LLM pipeline stages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from sleuth.cli.common import (
    BaseUrlOpt,
    IndexOpt,
    JsonOpt,
    at_least,
    cli_errors,
    console,
    datagen_app,
)
from sleuth.errors import InputError

if TYPE_CHECKING:
    from sleuth.datagen.pipeline.runner import Pipeline


@datagen_app.command("offline")
@cli_errors
def datagen_offline(
    index: IndexOpt,
    out: Annotated[Path, typer.Option(help="Task JSONL to write.")],
    n: Annotated[int, typer.Option(help="Tasks to generate.")] = 200,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    report: Annotated[
        Path | None, typer.Option(help="Also write the quality report (Markdown).")
    ] = None,
    chains: Annotated[
        str | None,
        typer.Option(
            help="Only chain tasks of these gold-document counts, e.g. 3,4 (titled corpora)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The LLM-free generator: bridge/comparison tasks from the corpus's link structure, verified;
    ``--chains 3,4``: chains of 3-4 documents, each naming the next (MuSiQue's shape)."""
    from sleuth.corpus.models import Document
    from sleuth.datagen.docs import DocStore
    from sleuth.datagen.offline.generator import generate_chains, generate_offline
    from sleuth.datagen.quality import render_markdown
    from sleuth.index import Index
    from sleuth.io import atomic_write_text, check_file_target
    from sleuth.tasks import save_tasks

    at_least(n, 1, "--n")
    hops = _hop_counts(chains) if chains is not None else None
    check_file_target(out, "--out")
    if report:
        check_file_target(report, "--report")
    store = DocStore(Index.open(index))
    docs = [Document(id=d, text=store.text(d), title=store.title(d) or None) for d in store.doc_ids]
    if hops:
        tasks, quality = generate_chains(docs, n, seed=seed, hops=hops, source=index.name)
    else:
        tasks, quality = generate_offline(docs, n, seed=seed, source=index.name)
    if not tasks:
        raise InputError(quality.shortfall or "made no tasks")
    if quality.shortfall:
        console.print(f"warning: {quality.shortfall}", markup=False, highlight=False)
    save_tasks(out, tasks)
    if report:
        atomic_write_text(report, render_markdown(quality))
    if as_json:
        print(quality.model_dump_json())
    else:
        console.print(f"{len(tasks)} verified tasks → {out}")
        print(render_markdown(quality))


def _hop_counts(text: str) -> tuple[int, ...]:
    """``--chains``: comma-separated gold-document counts, each 2 or more."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and int(p) >= 2 for p in parts):
        raise InputError(f"--chains {text!r} must list gold-document counts of 2 or more, e.g. 3,4")
    return tuple(dict.fromkeys(int(p) for p in parts))


def _pipeline(
    run_dir: Path,
    index: Path,
    model: str,
    base_url: str | None,
    api_key: str,
    cache: Path | None,
    mode: str,
    rps: float | None,
    domain: str,
    seed: int,
    hops: int,
    max_turns: int,
    workers: int,
    progress: bool,
) -> Pipeline:
    from sleuth.datagen.pipeline.llm import CacheMode, LLMConfig
    from sleuth.datagen.pipeline.runner import DatagenConfig
    from sleuth.datagen.pipeline.stages import open_pipeline

    llm = LLMConfig(
        model=model,
        base_url=base_url,
        api_key=api_key,
        cache_dir=cache or run_dir / "llm-cache",
        mode=cast(CacheMode, mode),  # checked by LLMConfig, as before
        requests_per_second=rps,
    )
    config = DatagenConfig(
        seed=seed, target_hops=hops, max_turns=max_turns, workers=workers, progress=progress
    )
    return open_pipeline(run_dir, index, llm, domain=domain, config=config)


def _datagen_stage_command(stage: str) -> Callable[..., None]:
    def command(
        run_dir: Annotated[
            Path, typer.Option("--run", help="Run folder (records, cache, ledger).")
        ],
        index: IndexOpt,
        model: Annotated[str, typer.Option(help="Model on the OpenAI-compatible endpoint.")],
        base_url: BaseUrlOpt = None,
        api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY")] = "EMPTY",
        cache: Annotated[Path | None, typer.Option(help="Record/replay cache folder.")] = None,
        mode: Annotated[str, typer.Option(help="auto | record | replay")] = "auto",
        rps: Annotated[float | None, typer.Option(help="Rate limit, requests per second.")] = None,
        domain: Annotated[str, typer.Option(help="web | sec | patents | email")] = "web",
        n: Annotated[int, typer.Option(help="Records to seed (explore, run).")] = 10,
        hops: Annotated[int, typer.Option(help="Hops per task (explore, run).")] = 1,
        seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
        max_turns: Annotated[int, typer.Option(help="Agent turns per loop.")] = 16,
        workers: Annotated[int, typer.Option(help="Records processed at once.")] = 2,
        out: Annotated[Path | None, typer.Option(help="Task JSONL (run).")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        from sleuth.datagen.pipeline.llm import CacheMissError, LLMError
        from sleuth.datagen.pipeline.stages import run_named_stage, run_pipeline
        from sleuth.io import check_file_target, check_folder_target, folder_lock

        check_folder_target(run_dir, "--run")
        if out is not None:
            check_file_target(out, "--out")
        with folder_lock(run_dir, "this datagen run"):
            pipe = _pipeline(
                run_dir,
                index,
                model,
                base_url,
                api_key,
                cache,
                mode,
                rps,
                domain,
                seed,
                hops,
                max_turns,
                workers,
                not as_json,
            )
            try:
                if stage == "run":
                    result = run_pipeline(pipe, n=n, out=out).model_dump()
                else:
                    stage_n = n if stage == "explore" else None
                    result = dict(run_named_stage(pipe, stage, n=stage_n))
            except (CacheMissError, LLMError) as e:
                raise InputError(str(e)) from None
        print(json.dumps(result) if as_json else json.dumps(result, indent=2))

    command.__doc__ = f"LLM pipeline stage: {stage} (resumable; records under --run)."
    return command


for _stage in ("explore", "verify", "distract", "extend", "expand", "run"):
    datagen_app.command(_stage)(cli_errors(_datagen_stage_command(_stage)))
