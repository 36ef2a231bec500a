"""``sleuth serve mcp``: the tools and the subagent over MCP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import (
    DEFAULT_REPLY_TOKENS,
    ApiKeyOpt,
    BaseUrlOpt,
    IndexOpt,
    ModelOpt,
    PolicyOpt,
    ReplyTokensOpt,
    at_least,
    cli_errors,
    serve_app,
)
from sleuth.errors import InputError


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
    at_least(max_reply_tokens, 1, "--max-reply-tokens")
    if http:  # before a model loads (serve checks again, for callers of the library)
        from sleuth.serve.http import check_bindable, http_notice

        http_notice(host, port, token, insecure)
        check_bindable(host, port)
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
