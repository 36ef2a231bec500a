"""``sleuth tools search|grep|read``: one retrieval tool call, as the policy makes it."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, cli_errors, tools_app


def _open(index):
    from sleuth.api import Index

    return Index.open(index)


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
        _open(index).search(query, exclude=set(exclude or []), reranker=reranker), as_json
    )


@tools_app.command("grep")
@cli_errors
def tools_grep(pattern: str, index: IndexOpt, as_json: JsonOpt = False) -> None:
    """One grep_corpus call."""
    _print_result(_open(index).grep(pattern), as_json)


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
    _print_result(_open(index).read(doc_id, query=query), as_json)
