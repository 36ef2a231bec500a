"""What every command shares: the typer apps, the console, error handling, common options."""

from __future__ import annotations

import functools
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


def at_least(value: float | None, minimum: float, option: str) -> None:
    """Refuse a numeric option below ``minimum`` (None means unset); NaN is refused too."""
    if value is not None and not value >= minimum:
        raise InputError(f"{option} must be at least {minimum}, got {value}")


def open_toolbox(index: Path, reranker: str | None = None):
    from sleuth.index import Index
    from sleuth.tools.rerank import make_reranker
    from sleuth.tools.toolbox import Toolbox

    return Toolbox(Index.open(index), reranker=make_reranker(reranker))


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
