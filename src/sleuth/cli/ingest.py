"""``sleuth ingest``: documents into an index."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sleuth.cli.common import IndexOpt, JsonOpt, app, at_least, cli_errors, console
from sleuth.corpus.files import ArchiveLimits, ReadOptions
from sleuth.embed import DEFAULT_EMBEDDER, EMBEDDER_CHOICES, INGEST_BATCH

if TYPE_CHECKING:
    from sleuth.corpus.models import Document


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
    delete_missing: Annotated[
        bool, typer.Option(help="Also remove indexed documents that PATHS no longer hold.")
    ] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="auto | sec (EDGAR filings) | patents (CSV/XML)")
    ] = "auto",
    follow_links: Annotated[
        bool, typer.Option(help="Follow symbolic links that lead out of a folder.")
    ] = False,
    skip_unreadable: Annotated[
        bool, typer.Option(help="List and leave out unreadable files in folders and zips.")
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
    """Read, chunk, embed and index documents; on an existing index, add new documents and replace
    changed ones (unchanged ones are not embedded again). Resumable: rerun it after a crash."""
    from sleuth.api import Index
    from sleuth.index.ingest_checks import check_new_settings
    from sleuth.progress import rate_progress

    # Every option first, then the documents: bad input writes nothing.
    check_new_settings(embedder, chunk_tokens, overlap_tokens, collection)
    at_least(progress_every, 0.1, "--progress-every")
    _check_delete_missing(index, delete_missing, repair)
    options = ReadOptions(follow_links, ArchiveLimits.parse(archive_limits or ""), skip_unreadable)
    docs = _checked_documents(paths, fmt, index, repair, chroma_url, batch_size, options)
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
                delete_missing=delete_missing,
            )
    if as_json:
        print(stats.model_dump_json())
    else:
        console.print(
            f"indexed {stats.index_documents} documents / {stats.index_chunks} chunks in {index} "
            f"(added {stats.added}, replaced {stats.replaced}, unchanged {stats.unchanged}, "
            f"deleted {stats.deleted})"
        )


def _check_delete_missing(index: Path, delete_missing: bool, repair: bool) -> None:
    """``--delete-missing`` needs documents to compare with, and means nothing to a repair."""
    from sleuth.errors import InputError
    from sleuth.index.manifest import MANIFEST, read_manifest

    if not delete_missing:
        return
    if repair:
        raise InputError("--delete-missing and --repair cannot be combined; run them one by one")
    if not (index / MANIFEST).exists() or not read_manifest(index).documents:
        raise InputError(
            "--delete-missing: the index has no documents yet, so nothing can be missing; "
            "ingest without it",
            source=str(index),
        )


def _checked_documents(
    paths: list[Path],
    fmt: str,
    index: Path,
    repair: bool,
    chroma_url: str | None,
    batch_size: int,
    options: ReadOptions,
) -> list[Document]:
    """The documents to ingest, read and checked before anything is written (none to repair)."""
    from sleuth.api import load_documents
    from sleuth.index.chroma import no_write_client
    from sleuth.index.ingest_checks import check_ingest_inputs, clean_documents
    from sleuth.index.manifest import read_manifest

    if repair:
        read_manifest(index)  # only an existing index can be repaired
    max_batch = no_write_client(chroma_url).get_max_batch_size()
    docs, changed = clean_documents([] if repair else load_documents(paths, fmt, options))
    check_ingest_inputs(docs, batch_size, max_batch)
    for line in options.skipped:
        console.print(f"skipped {line}", markup=False, highlight=False)
    if changed:
        _warn(f"lone surrogates replaced by U+FFFD in {len(changed)} document(s)", changed)
    if options.recoded:
        _warn(f"{len(options.recoded)} file(s) not UTF-8, read as", options.recoded)
    return docs


def _warn(what: str, items: list[str]) -> None:
    more = " ..." if len(items) > 5 else ""
    line = f"warning: {what}: {', '.join(items[:5])}{more}"
    console.print(line, markup=False, highlight=False)
