"""``sleuth demo``: the offline demo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import app, cli_errors, console


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
