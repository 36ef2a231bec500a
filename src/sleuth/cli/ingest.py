"""``sleuth ingest``: documents into an index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, app, cli_errors, console, progress_bar


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
    from sleuth.api import Index, load_documents
    from sleuth.corpus.files import ArchiveLimits, ReadOptions
    from sleuth.index.chroma import no_write_client
    from sleuth.index.ingest_checks import check_ingest_inputs, check_new_settings, clean_documents
    from sleuth.index.manifest import read_manifest

    # Every option first, then the documents: bad input writes nothing.
    check_new_settings(embedder, chunk_tokens, overlap_tokens, collection)
    options = ReadOptions(follow_links, ArchiveLimits.parse(archive_limits or ""))
    if repair:
        read_manifest(index)  # only an existing index can be repaired
    max_batch = no_write_client(chroma_url).get_max_batch_size()
    docs, changed = clean_documents([] if repair else load_documents(paths, fmt, options))
    check_ingest_inputs(docs, batch_size, max_batch)
    for line in options.skipped:
        console.print(f"skipped {line}", markup=False, highlight=False)
    if changed:
        console.print(
            f"warning: lone surrogates replaced by U+FFFD in {len(changed)} document(s): "
            f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}",
            markup=False,
            highlight=False,
        )
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
