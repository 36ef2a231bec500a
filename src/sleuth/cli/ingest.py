"""``sleuth ingest``: documents into an index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, app, at_least, cli_errors, console
from sleuth.embed import DEFAULT_EMBEDDER, EMBEDDER_CHOICES, INGEST_BATCH


@app.command()
@cli_errors
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="JSONL files, folders, zips, mbox/.eml files.")
    ],
    index: IndexOpt,
    embedder: Annotated[str, typer.Option(help=EMBEDDER_CHOICES)] = DEFAULT_EMBEDDER,
    chunk_tokens: Annotated[int, typer.Option(help="Max o200k tokens per chunk.")] = 512,
    overlap_tokens: Annotated[int, typer.Option(help="Tokens shared by consecutive chunks.")] = 48,
    chroma_url: Annotated[
        str | None, typer.Option(help="Use a Chroma server (http://host:port).")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(help="Chunks per embedder call and Chroma write.")
    ] = INGEST_BATCH,
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
    progress_every: Annotated[
        float, typer.Option(help="Seconds between progress lines when not on a terminal.")
    ] = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Read, chunk, embed and index documents (resumable: rerun the same command after a crash)."""
    from sleuth.corpus.files import ArchiveLimits, ReadOptions
    from sleuth.corpus.readers import read_documents
    from sleuth.index import Index
    from sleuth.index.ingest_checks import check_ingest_inputs
    from sleuth.progress import rate_progress

    at_least(progress_every, 0.1, "--progress-every")
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
        with rate_progress(console, "embedding chunks", "chunks", progress_every) as update:
            stats = idx.ingest(
                docs,
                batch_size=batch_size,
                progress=lambda _phase, done, total: update(done, total),
            )
    if as_json:
        print(stats.model_dump_json())
    else:
        console.print(
            f"indexed {stats.index_documents} documents / {stats.index_chunks} chunks in {index}"
        )
