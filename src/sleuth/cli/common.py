"""What every command shares: the typer apps, the console, error handling, common options."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from typer.core import TyperGroup

from sleuth.errors import InputError, SleuthError
from sleuth.progress import progress_bar as _progress_bar

if TYPE_CHECKING:
    from sleuth.harness import HarnessConfig
    from sleuth.policies.spec import BuiltPolicy
    from sleuth.tools.base import Tools

# click's exceptions, wherever this typer takes click from (newer releases carry their own copy)
_CLICK = sys.modules[typer.BadParameter.__module__]


class OneLineErrors(TyperGroup):
    """The ``sleuth`` group: a usage error (a value of the wrong type, a missing option, an
    unknown command) is one line on stderr and exit code 2, like every other bad input, instead
    of click's boxed, multi-line report."""

    def main(self, args: Any = None, prog_name: Any = None, *rest: Any, **kw: Any) -> Any:
        standalone = kw.pop("standalone_mode", True)
        if not standalone:
            return super().main(args, prog_name, *rest, standalone_mode=False, **kw)  # type: ignore[misc]
        try:
            code = super().main(args, prog_name, *rest, standalone_mode=False, **kw)  # type: ignore[misc]
        except _CLICK.NoArgsIsHelpError:
            return super().main(args, prog_name, *rest, **kw)  # prints the help as typer does
        except _CLICK.ClickException as e:
            where = getattr(e, "ctx", None)
            see = f"; see `{where.command_path} --help`" if where is not None else ""
            print(f"error: {' '.join(e.format_message().split())}{see}", file=sys.stderr)
            sys.exit(e.exit_code)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    help="sleuth: an offline self-editing agentic search subagent.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
)
tools_app = typer.Typer(help="Call one retrieval tool as the policy would.", no_args_is_help=True)
serve_app = typer.Typer(help="Serve sleuth to other programs.", no_args_is_help=True)
index_app = typer.Typer(
    help="Indexes over a Chroma collection you already have.", no_args_is_help=True
)
app.add_typer(index_app, name="index")
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


def open_toolbox(index: Path, reranker: str | None = None) -> Tools:
    """The retrieval tools over the ``--index`` folder (:func:`sleuth.api.open_tools`)."""
    from sleuth.api import open_tools

    return open_tools(index, reranker)


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
    typer.Option(
        help="Learned ranker JSON for the heuristic agent, or 'shipped' (default: the index's "
        "own from `sleuth adapt`, else the shipped one)."
    ),
]

TextStageOpt = Annotated[
    Path | None,
    typer.Option(
        help="Text stage folder for --policy heuristic-text (trained by benchmarks/text_stage.py)."
    ),
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
    text_stage: Path | None = None,
) -> BuiltPolicy:
    """The policy the options name (``--policy SPEC``, or the ``--model``/``--base-url``
    shorthand), built by :func:`sleuth.policies.build_policy`."""
    from sleuth.policies.spec import PolicyOptions, build_policy, spec_from_options
    from sleuth.ranking.adapted import SHIPPED

    spec = spec_from_options(policy, model, base_url, fmt)
    if ranker is not None and str(ranker) != SHIPPED and not ranker.is_file():
        raise InputError(
            "--ranker: no such file (write one with `sleuth train ranker`, or give 'shipped')",
            source=str(ranker),
        )
    options = PolicyOptions(
        api_key=api_key,
        adapter=adapter,
        engine=engine,
        ranker=str(ranker) if ranker else None,
        text_stage=str(text_stage) if text_stage else None,
    )
    return build_policy(spec, options)


def _harness_config(budget: int, max_turns: int, max_reply_tokens: int) -> HarnessConfig:
    """Harness settings from the options (a policy may add its own: ``BuiltPolicy.harness``)."""
    from sleuth.harness import BudgetConfig, HarnessConfig

    return HarnessConfig(
        budget=BudgetConfig(total=budget, max_turns=max_turns), max_reply_tokens=max_reply_tokens
    )
