"""``sleuth tools search|grep|read|describe``: one retrieval tool call, as the policy makes it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, cli_errors, tools_app

if TYPE_CHECKING:
    from pathlib import Path

    from sleuth.api import Index
    from sleuth.tools.types import ToolResult

WhereOpt = Annotated[
    str | None,
    typer.Option(
        "--where",
        help='Metadata filter (JSON, Chroma\'s where grammar), e.g. \'{"from": "a@b.com"}\'; '
        "`sleuth tools describe` lists the fields.",
    ),
]


def _open(index: Path) -> Index:

    from sleuth.api import Index

    return Index.open(index)


def _print_result(result: ToolResult, as_json: bool) -> None:
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
    where: WhereOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One search_corpus call."""
    idx = _open(index)
    where_ = _check(idx, where)
    _print_result(
        idx.search(query, exclude=set(exclude or []), reranker=reranker, where=where_), as_json
    )


@tools_app.command("grep")
@cli_errors
def tools_grep(
    pattern: str, index: IndexOpt, where: WhereOpt = None, as_json: JsonOpt = False
) -> None:
    """One grep_corpus call."""
    idx = _open(index)
    _print_result(idx.grep(pattern, where=_check(idx, where)), as_json)


@tools_app.command("describe")
@cli_errors
def tools_describe(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """The corpus's metadata fields (describe_corpus); --json prints the whole description."""
    idx = _open(index)
    if as_json:
        print(json.dumps(idx.describe(), ensure_ascii=False, indent=1))
        return
    _print_result(idx.tools().describe_corpus(), as_json)


def _check(index: Any, where: str | None) -> dict[str, Any] | None:
    """The ``--where`` JSON as a filter, once it passed the checks (a bad one is InputError: one
    line). Imported here: the filter grammar loads the index, which ``sleuth --help`` needs not."""
    from sleuth.index.where import parse_where

    filter_ = parse_where(where)
    if filter_ is not None:
        index.check_where(filter_)
    return filter_


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
