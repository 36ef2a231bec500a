"""The ``sleuth`` command line (typer). Bad input: one line on stderr, exit code 2."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress

from sleuth.errors import InputError, SleuthError
from sleuth.progress import progress_bar as _progress_bar

app = typer.Typer(
    help="sleuth: an offline self-editing agentic search subagent.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
tools_app = typer.Typer(help="Call one retrieval tool as the policy would.", no_args_is_help=True)
serve_app = typer.Typer(help="Serve sleuth to other programs.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(serve_app, name="serve")
datagen_app = typer.Typer(help="Synthetic multi-hop task pipeline.", no_args_is_help=True)
app.add_typer(datagen_app, name="datagen")
train_app = typer.Typer(help="SFT warm-up and CISPO reinforcement learning.", no_args_is_help=True)
app.add_typer(train_app, name="train")
console = Console(stderr=True)


def cli_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn sleuth's own errors (bad input, bad settings) into one line on stderr and exit code 2;
    anything else is a bug and keeps its traceback (exit code 1)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SleuthError as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"error: {msg}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper


def progress_bar() -> Progress:
    return _progress_bar(console)


IndexOpt = Annotated[Path, typer.Option("--index", "-i", help="Index folder.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _at_least(value: float | None, minimum: float, option: str) -> None:
    """Refuse a numeric option below ``minimum`` (None means unset); NaN is refused too."""
    if value is not None and not value >= minimum:
        raise InputError(f"{option} must be at least {minimum}, got {value}")


@app.command()
@cli_errors
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="JSONL files, folders, zips, mbox/.eml files.")
    ],
    index: IndexOpt,
    embedder: Annotated[
        str, typer.Option(help="minilm | hash[:DIM] | st:PATH | openai:MODEL@URL")
    ] = "minilm",
    chunk_tokens: Annotated[int, typer.Option(help="Max o200k tokens per chunk.")] = 512,
    overlap_tokens: Annotated[int, typer.Option(help="Tokens shared by consecutive chunks.")] = 48,
    chroma_url: Annotated[
        str | None, typer.Option(help="Use a Chroma server (http://host:port).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Chunks embedded per batch.")] = 128,
    collection: Annotated[
        str | None, typer.Option(help="Chroma collection name (default: unique to the index).")
    ] = None,
    repair: Annotated[bool, typer.Option(help="Roll back an interrupted ingest instead.")] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="auto | sec (EDGAR filings) | patents (CSV/XML)")
    ] = "auto",
    follow_links: Annotated[
        bool, typer.Option(help="Follow symbolic links that lead out of a folder.")
    ] = False,
    archive_limits: Annotated[
        str | None,
        typer.Option(
            help="Raise zip limits, e.g. entry=256MiB,total=4GiB,ratio=500,entries=200000 "
            "(defaults 64MiB, 1GiB, 100, 100000)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read, chunk, embed and index documents (resumable: rerun the same command after a crash)."""
    from sleuth.corpus.files import ArchiveLimits, ReadOptions
    from sleuth.corpus.readers import read_documents
    from sleuth.index import Index
    from sleuth.index.store import check_ingest_inputs

    options = ReadOptions(follow_links, ArchiveLimits.parse(archive_limits or ""))
    docs = [] if repair else read_documents(paths, fmt, options)
    check_ingest_inputs(docs, batch_size, chroma_url=chroma_url)  # bad input writes nothing
    for line in options.skipped:
        console.print(f"skipped {line}", markup=False, highlight=False)
    idx = Index.create(
        index,
        embedder=embedder,
        chunk_tokens=chunk_tokens,
        overlap_tokens=overlap_tokens,
        chroma_url=chroma_url,
        collection=collection,
    )
    if repair:
        stats = idx.repair()
    else:
        with progress_bar() as bar:
            task = bar.add_task("embedding chunks", total=None)

            def report(phase: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            stats = idx.ingest(docs, batch_size=batch_size, progress=report)
    if as_json:
        print(stats.model_dump_json())
    else:
        console.print(
            f"indexed {stats.index_documents} documents / {stats.index_chunks} chunks in {index}"
        )


def _toolbox(index: Path, reranker: str | None = None):
    from sleuth.index import Index
    from sleuth.tools.rerank import make_reranker
    from sleuth.tools.toolbox import Toolbox

    return Toolbox(Index.open(index), reranker=make_reranker(reranker))


def _print_result(result, as_json: bool) -> None:
    from sleuth.tools.types import render_result

    if as_json:
        out: list[dict[str, Any]] = [c.model_dump() for c in result.chunks]
        if result.error is not None:
            out.append({"error": result.error})
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(render_result(result))
    if result.error is not None:
        raise typer.Exit(1)


@tools_app.command("search")
@cli_errors
def tools_search(
    query: str,
    index: IndexOpt,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", help="Chunk id to exclude.")
    ] = None,
    reranker: Annotated[
        str | None, typer.Option(help="none | cross-encoder:PATH | endpoint:MODEL@URL")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One search_corpus call."""
    _print_result(
        _toolbox(index, reranker).search_corpus(query, exclude=set(exclude or [])), as_json
    )


@tools_app.command("grep")
@cli_errors
def tools_grep(pattern: str, index: IndexOpt, as_json: JsonOpt = False) -> None:
    """One grep_corpus call."""
    _print_result(_toolbox(index).grep_corpus(pattern), as_json)


@tools_app.command("read")
@cli_errors
def tools_read(
    doc_id: str,
    index: IndexOpt,
    query: Annotated[
        str | None, typer.Option(help="Keep the chunks most relevant to this.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One read_document call."""
    _print_result(_toolbox(index).read_document(doc_id, query=query), as_json)


ModelOpt = Annotated[
    str | None,
    typer.Option(
        help="Shorthand: with --base-url, openai:MODEL@URL (harmony:MODEL@URL with --format "
        "harmony); alone, local:PATH (HF folder or .gguf)."
    ),
]
BaseUrlOpt = Annotated[
    str | None, typer.Option(help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
]
FormatOpt = Annotated[
    str, typer.Option("--format", help="chat (tool calling) | harmony (gpt-oss completions)")
]
PolicyOpt = Annotated[
    str | None,
    typer.Option(
        help="heuristic (default) | single-pass | bm25 | dense | local[:PATH] (local: the shipped "
        "SmolLM2 + SFT adapter) | openai:MODEL@URL | harmony:MODEL@URL"
    ),
]
ApiKeyOpt = Annotated[str, typer.Option(envvar="OPENAI_API_KEY", help="API key for a server.")]
AdapterOpt = Annotated[str | None, typer.Option(help="LoRA adapter folder for a local model.")]
EngineOpt = Annotated[
    str,
    typer.Option(
        help="What runs a local model: auto (ct2 when installed) | transformers | ct2 (CTranslate2, "
        "faster on CPU)."
    ),
]
ReplyTokensOpt = Annotated[
    int,
    typer.Option(
        help="Cap on each reply's length in tokens (a trained adapter keeps its own).",
    ),
]
DEFAULT_REPLY_TOKENS = 2048  # a search turn is calls + a short note; reasoning fits too


RankerOpt = Annotated[
    Path | None,
    typer.Option(help="Learned ranker JSON for the heuristic agent (default: the shipped one)."),
]


def chosen_policy(
    policy: str | None,
    model: str | None = None,
    base_url: str | None = None,
    fmt: str = "chat",
    api_key: str = "EMPTY",
    adapter: str | None = None,
    engine: str = "transformers",
    ranker: Path | None = None,
):
    """The policy the options name (``--policy SPEC``, or the ``--model``/``--base-url``
    shorthand), built by :func:`sleuth.policies.build_policy`."""
    from sleuth.policies.spec import PolicyOptions, build_policy, spec_from_options

    spec = spec_from_options(policy, model, base_url, fmt)
    if ranker is not None and not ranker.is_file():
        raise InputError(
            "--ranker: no such file (write one with `sleuth train ranker`)", source=str(ranker)
        )
    options = PolicyOptions(
        api_key=api_key, adapter=adapter, engine=engine, ranker=str(ranker) if ranker else None
    )
    return build_policy(spec, options)


def _harness_config(budget: int, max_turns: int, max_reply_tokens: int):
    """Harness settings from the options (a policy may add its own: ``BuiltPolicy.harness``)."""
    from sleuth.harness import BudgetConfig, HarnessConfig

    return HarnessConfig(
        budget=BudgetConfig(total=budget, max_turns=max_turns), max_reply_tokens=max_reply_tokens
    )


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
    budget: Annotated[int, typer.Option(help="Token budget T.")] = 32768,
    max_turns: Annotated[int, typer.Option(help="Maximum turns.")] = 128,
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
    from sleuth.harness import run_query
    from sleuth.io import check_file_target

    _at_least(max_reply_tokens, 1, "--max-reply-tokens")
    _at_least(budget, 1, "--budget")
    _at_least(max_turns, 1, "--max-turns")
    if trajectory is not None:
        check_file_target(trajectory, "--trajectory")
    if model and not base_url and not Path(model).exists():
        raise InputError(
            f"--model {model}: no such local model file or folder (or give --base-url)"
        )
    config = _harness_config(budget, max_turns, max_reply_tokens)
    tools = _toolbox(index, reranker)
    built = chosen_policy(
        policy, model, base_url, fmt, api_key, adapter, engine=engine, ranker=ranker
    )
    tools, factory = built.for_tools(tools)
    result = run_query(
        tools,
        query,
        policy=factory(0),
        trajectory=trajectory,
        config=built.harness(config),
    )
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), ensure_ascii=False))
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
    beta: Annotated[float, typer.Option(help="β of F_β.")] = 4.0,
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
    if as_json:
        print(json.dumps(result))
        return
    for section in ("metrics", "reward"):
        console.print(f"[bold]{section}[/bold]")
        for k, v in result[section].items():
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
    rollouts: Annotated[int, typer.Option(help="Rollouts per query, fused (the report's 4x).")] = 1,
    fuse: Annotated[str, typer.Option(help="Fusion of rollouts.")] = "rrf",
    concurrency: Annotated[int, typer.Option(help="Queries run at once.")] = 4,
    budget: Annotated[int, typer.Option(help="Token budget T.")] = 32768,
    max_turns: Annotated[int, typer.Option(help="Maximum turns.")] = 128,
    max_reply_tokens: ReplyTokensOpt = DEFAULT_REPLY_TOKENS,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    beta: Annotated[float, typer.Option(help="β of F_β.")] = 4.0,
    retry_failed: Annotated[
        bool, typer.Option(help="Rerun queries whose every rollout failed.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a task set (resumable, concurrent); write per-query JSONL, summary, plots, HTML."""
    from sleuth.eval import run_eval
    from sleuth.io import check_folder_target
    from sleuth.tasks import load_tasks

    _at_least(limit, 0, "--limit")
    _at_least(max_reply_tokens, 1, "--max-reply-tokens")
    _at_least(budget, 1, "--budget")
    _at_least(max_turns, 1, "--max-turns")
    check_folder_target(out, "--out")
    task_list = load_tasks(tasks)[:limit]
    config = _harness_config(budget, max_turns, max_reply_tokens)
    built = chosen_policy(
        policy, model, base_url, fmt, api_key, adapter, engine=engine, ranker=ranker
    )
    summary = run_eval(
        task_list,
        built,
        _toolbox(index),
        out,
        concurrency=concurrency,
        rollouts=rollouts,
        fuse=fuse,
        harness_config=config,
        beta=beta,
        retry_failed=retry_failed,
    )
    if as_json:
        print(json.dumps(summary))
    else:
        print((Path(out) / "summary.md").read_text())
        console.print(f"report: {Path(out) / 'report.html'}")


@serve_app.command("mcp")
@cli_errors
def serve_mcp(
    index: IndexOpt,
    http: Annotated[bool, typer.Option(help="Streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP host.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8765,
    policy: PolicyOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = "EMPTY",
    budget: Annotated[int | None, typer.Option(help="Token budget T of `search`.")] = None,
    max_reply_tokens: ReplyTokensOpt = DEFAULT_REPLY_TOKENS,
    reranker: Annotated[
        str | None, typer.Option(help="none | cross-encoder:PATH | endpoint:MODEL@URL")
    ] = None,
    trajectory_dir: Annotated[
        Path | None, typer.Option(help="Where `search` writes trajectories.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SLEUTH_MCP_TOKEN",
            help="Bearer token HTTP clients must send; needed for a host beyond loopback.",
        ),
    ] = None,
    insecure: Annotated[
        bool, typer.Option(help="Serve HTTP beyond loopback with no token (anyone can call it).")
    ] = False,
) -> None:
    """Serve the four tools and the whole subagent (`search`) over MCP (stdio; optional HTTP)."""
    from sleuth.harness import HarnessConfig
    from sleuth.serve import McpServerConfig, serve, serving_policy

    if not 1 <= port <= 65535:
        raise InputError(f"--port must be between 1 and 65535, got {port}")
    _at_least(max_reply_tokens, 1, "--max-reply-tokens")
    built = serving_policy(policy, model=model, base_url=base_url, api_key=api_key)
    harness = built.harness(HarnessConfig(max_reply_tokens=max_reply_tokens))
    serve(
        index,
        "http" if http else "stdio",
        host,
        port,
        built,
        McpServerConfig(
            reranker=reranker, harness=harness, budget=budget, trajectory_dir=trajectory_dir
        ),
        token=token,
        insecure=insecure,
    )


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
    as_json: JsonOpt = False,
) -> None:
    """The LLM-free generator: bridge/comparison tasks from the corpus's link structure, verified."""
    from sleuth.corpus.models import Document
    from sleuth.datagen.docs import DocStore
    from sleuth.datagen.offline import generate_offline
    from sleuth.datagen.quality import render_markdown
    from sleuth.index import Index
    from sleuth.io import atomic_write_text, check_file_target
    from sleuth.tasks import save_tasks

    _at_least(n, 1, "--n")
    check_file_target(out, "--out")
    if report:
        check_file_target(report, "--report")
    store = DocStore(Index.open(index))
    docs = [Document(id=d, text=store.text(d), title=store.title(d) or None) for d in store.doc_ids]
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
):
    from sleuth.datagen.llm import CacheMode, LLMConfig
    from sleuth.datagen.runner import DatagenConfig
    from sleuth.datagen.stages import open_pipeline

    llm = LLMConfig(
        model=model,
        base_url=base_url,
        api_key=api_key,
        cache_dir=cache or run_dir / "llm-cache",
        mode=CacheMode(mode),
        requests_per_second=rps,
    )
    config = DatagenConfig(
        seed=seed, target_hops=hops, max_turns=max_turns, workers=workers, progress=progress
    )
    return open_pipeline(run_dir, index, llm, domain=domain, config=config)


def _datagen_stage_command(stage: str):
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
        from sleuth.datagen.llm import CacheMissError, LLMError
        from sleuth.datagen.stages import run_named_stage, run_pipeline
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


StudentOpt = Annotated[
    str | None, typer.Option("--model", help="Student: HF folder or .gguf (default SmolLM2).")
]
DeviceOpt = Annotated[str, typer.Option(help="cpu | cuda | cuda:N")]


def _student(
    model: str | None, adapter: str | None, device: str, full: bool, lora_r: int, lora_alpha: int
):
    from sleuth.train.model import StudentConfig

    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
        raise InputError(f"unknown --device {device!r}; use cpu, mps, cuda or cuda:N")
    if model is None:
        from sleuth.policies.local_hf import smollm2_gguf_path

        model = str(smollm2_gguf_path())
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return StudentConfig(
        path=model,
        adapter=adapter,
        lora=not full,
        lora_r=lora_r,
        lora_alpha=lora_alpha,
        device=device,
        dtype=dtype,
    )


def _set_threads(threads: int | None) -> None:
    """On a shared CPU, one torch thread per process is often fastest (see train/rl.py notes)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


@train_app.command("ranker")
@cli_errors
def train_ranker_cmd(
    index: IndexOpt,
    tasks: Annotated[
        list[Path], typer.Option(help="Task JSONL (repeatable): generated or benchmark tasks.")
    ],
    out: Annotated[Path, typer.Option(help="Where to write the ranker JSON.")],
    regularization: Annotated[float, typer.Option(help="Inverse L2 strength C.")] = 1.0,
    refit_passes: Annotated[
        int, typer.Option(help="Agent passes that refit selection with the search head.")
    ] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Fit the learned ranker (search rerank + document selection) on the agent's trajectories."""
    from sleuth.index import Index
    from sleuth.tasks import load_tasks
    from sleuth.tools.toolbox import Toolbox
    from sleuth.train.ranker import RankerTrainConfig, train_ranker

    config = RankerTrainConfig(regularization=regularization, refit_passes=refit_passes)
    loaded = [task for path in tasks for task in load_tasks(path)]
    if len({t.id for t in loaded}) != len(loaded):
        raise InputError("task ids must be unique across --tasks files")
    toolbox = Toolbox(Index.open(index))
    if out.is_dir():
        raise InputError("--out is a folder; give a file path for the ranker JSON", source=str(out))
    with progress_bar() as bar:
        task = bar.add_task("trajectories", total=len(loaded))

        def report(phase: str, done: int, total: int) -> None:
            bar.update(task, description=phase, completed=done, total=total)

        model = train_ranker([(toolbox, loaded)], config, progress=report)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    if as_json:
        print(json.dumps({"out": str(out), **model.trained_on}))
    else:
        console.print(f"ranker trained on {len(model.question_ids)} tasks → {out}")


@train_app.command("sft")
@cli_errors
def train_sft(
    index: IndexOpt,
    tasks: Annotated[Path, typer.Option(help="Task JSONL.")],
    out: Annotated[Path, typer.Option(help="Output folder (teacher runs, checkpoints, model).")],
    model: StudentOpt = None,
    teacher: Annotated[
        str, typer.Option(help="Policy spec: heuristic | openai:MODEL@URL | local:PATH | ...")
    ] = "heuristic",
    rollouts_per_task: Annotated[int, typer.Option(help="Teacher rollouts per task.")] = 1,
    epochs: Annotated[int, typer.Option(help="Passes over kept sequences.")] = 2,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-4,
    batch_size: Annotated[int, typer.Option(help="Sequences per optimiser step.")] = 8,
    max_seq_len: Annotated[int, typer.Option(help="Longest training sequence.")] = 4096,
    full: Annotated[bool, typer.Option(help="Full fine-tune instead of LoRA.")] = False,
    lora_r: Annotated[int, typer.Option(help="LoRA rank.")] = 32,
    lora_alpha: Annotated[int, typer.Option(help="LoRA alpha.")] = 32,
    device: DeviceOpt = "cpu",
    budget: Annotated[
        int, typer.Option(help="Token budget T of teacher runs (the student's context).")
    ] = 8192,
    max_turns: Annotated[int, typer.Option(help="Maximum turns of teacher runs.")] = 8,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    threads: Annotated[int | None, typer.Option(help="torch threads.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Teacher trajectories through the harness, the report's filter, then LoRA/full fine-tuning."""
    from sleuth.harness import BudgetConfig, HarnessConfig
    from sleuth.tasks import load_tasks
    from sleuth.train.sft import SFTConfig, build_teacher, run_sft

    _set_threads(threads)
    config = SFTConfig(
        student=_student(model, None, device, full, lora_r, lora_alpha),
        out_dir=str(out),
        lr=lr,
        epochs=epochs,
        batch_size=batch_size,
        max_seq_len=max_seq_len,
        seed=seed,
        rollouts_per_task=rollouts_per_task,
        harness=HarnessConfig(
            budget=BudgetConfig(total=budget, max_turns=max_turns), max_reply_tokens=512
        ),
    )
    tools, make_teacher = build_teacher(teacher, _toolbox(index))
    report = run_sft(config, load_tasks(tasks)[:limit], tools, make_teacher)
    print(report.model_dump_json(indent=None if as_json else 2))


@train_app.command("rl")
@cli_errors
def train_rl(
    index: IndexOpt,
    tasks: Annotated[Path, typer.Option(help="Task JSONL.")],
    out: Annotated[
        Path, typer.Option(help="Output folder (metrics, checkpoints); rerun to resume.")
    ],
    model: StudentOpt = None,
    adapter: Annotated[
        str | None, typer.Option(help="Start from this LoRA adapter (the SFT output).")
    ] = None,
    preset: Annotated[
        str, typer.Option(help="report (128×8, 4 substeps) | cpu-small (4×4)")
    ] = "cpu-small",
    queries_per_step: Annotated[int | None, typer.Option(help="Queries per step.")] = None,
    rollouts: Annotated[int | None, typer.Option(help="Rollouts per query (G).")] = None,
    substeps: Annotated[int | None, typer.Option(help="Gradient substeps per step.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Stop after this many steps.")] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate.")] = None,
    w_min: Annotated[
        float, typer.Option(help="CISPO lower bound on the IS weight (absolute).")
    ] = 0.0,
    w_max: Annotated[
        float, typer.Option(help="CISPO upper bound on the IS weight (absolute).")
    ] = 5.0,
    aggregation: Annotated[
        str, typer.Option(help="token_mean | token_sum | prompt_mean")
    ] = "token_mean",
    kl_coef: Annotated[float, typer.Option(help="KL to the reference (0: none).")] = 0.0,
    device: DeviceOpt = "cpu",
    vllm_url: Annotated[
        str | None, typer.Option(help="Sample rollouts from a vLLM server at this URL.")
    ] = None,
    served_model: Annotated[str | None, typer.Option(help="Model name on the vLLM server.")] = None,
    engine: Annotated[
        str, typer.Option(help="In-process rollout sampler: transformers | ct2 (CTranslate2).")
    ] = "transformers",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    threads: Annotated[int | None, typer.Option(help="torch threads.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """CISPO: G rollouts per query, group-normalised advantages, K substeps; resumable."""
    from sleuth.tasks import load_tasks
    from sleuth.train.cispo import AGGREGATIONS
    from sleuth.train.rl import RLConfig, run_rl

    if aggregation not in AGGREGATIONS:
        raise InputError(f"unknown --aggregation {aggregation!r}; use {', '.join(AGGREGATIONS)}")
    _set_threads(threads)
    student = _student(model, adapter, device, False, 32, 32)
    overrides = {
        k: v
        for k, v in {
            "queries_per_step": queries_per_step,
            "rollouts_per_query": rollouts,
            "substeps": substeps,
            "max_steps": max_steps,
            "lr": lr,
        }.items()
        if v is not None
    }
    overrides |= {
        "w_min": w_min,
        "w_max": w_max,
        "aggregation": aggregation,
        "kl_coef": kl_coef,
        "seed": seed,
        "rollout_engine": engine,
    }
    if preset == "cpu-small":
        config = RLConfig.cpu_small(student.path, out_dir=str(out), student=student, **overrides)
    elif preset == "report":
        config = RLConfig(student=student, out_dir=str(out), **overrides)
    else:
        raise InputError(f"unknown --preset {preset!r}; use report or cpu-small")
    make_engine = None
    if vllm_url:
        from sleuth.train.rollout import OpenAICompletionsEngine

        if not served_model:
            raise InputError("--vllm-url needs --served-model")

        def make_engine(model, tokenizer):
            return OpenAICompletionsEngine(
                vllm_url, served_model, tokenizer, adapter_root=out / "adapters"
            )

    log = run_rl(config, load_tasks(tasks), _toolbox(index), make_engine=make_engine)
    print(json.dumps(log[-1] if log else {}, indent=None if as_json else 2, default=str))


@app.command()
@cli_errors
def demo(
    quick: Annotated[
        bool, typer.Option(help="A small subset: about 3 minutes on 2 cores.")
    ] = False,
    out: Annotated[Path, typer.Option(help="Output folder (index, results, reports).")] = Path(
        "sleuth-demo"
    ),
    policy: Annotated[
        str,
        typer.Option(
            help="Subagent policy spec: local (the shipped SmolLM2 + adapter) or any other."
        ),
    ] = "local",
) -> None:
    """The main job on the embedded default: offline, no server, no API key."""
    from sleuth.demo import DemoConfig, run_demo

    run_demo(out, DemoConfig.quick() if quick else DemoConfig(), console, policy=policy)


if __name__ == "__main__":
    app()
