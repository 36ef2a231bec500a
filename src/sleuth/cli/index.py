"""``sleuth index attach|sync``: an index over a Chroma collection the user already has."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, cli_errors, console, index_app

if TYPE_CHECKING:
    from sleuth.index.manifest import SyncResult


def _report(result: SyncResult, index: Path, as_json: bool, verb: str) -> None:
    if as_json:
        print(result.model_dump_json())
        return
    skipped = f", {result.skipped} without a document skipped" if result.skipped else ""
    console.print(
        f"{verb} {result.records} records into {index}: {result.added} added, {result.changed} "
        f"changed, {result.deleted} deleted{skipped}",
        markup=False,
        highlight=False,
    )


@index_app.command("attach")
@cli_errors
def attach(
    index: IndexOpt,
    collection: Annotated[str, typer.Option(help="The Chroma collection's name.")],
    chroma_path: Annotated[
        Path | None, typer.Option(help="A persistent Chroma folder (chromadb.PersistentClient).")
    ] = None,
    chroma_url: Annotated[
        str | None, typer.Option(help="A Chroma server (http://host:port).")
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            help="Embed queries with this (minilm | st:PATH | openai:MODEL@URL) instead of the "
            "collection's own embedding function; its dimension must match."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Search an existing Chroma collection with sleuth, never writing to it: its vectors answer
    the dense side; --index gets the lexical and grep sides built from its documents."""
    from sleuth.api import Index

    idx = Index.attach(
        index, collection, chroma_path=chroma_path, chroma_url=chroma_url, embedder=embedder
    )
    assert idx.manifest.source is not None and idx.manifest.source.last_sync is not None
    _report(idx.manifest.source.last_sync, index, as_json, "attached")


@index_app.command("sync")
@cli_errors
def sync(index: IndexOpt, as_json: JsonOpt = False) -> None:
    """Pick up records added, changed or deleted in an attached collection (the lexical side is
    rebuilt in full)."""
    from sleuth.api.index import sync_attached

    _report(sync_attached(index), index, as_json, "synced")
