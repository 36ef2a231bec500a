"""Incremental ingest: what changed since the published generation, and the next generation.

Readers see one generation, never a mix:

- The manifest names the published generation: its number and its lexical folder
  (``lexical-<N>/``: the chunk rows with their Chroma keys and hashes, BM25, grep, the documents'
  metadata and hashes). An update writes the next folder beside it and publishes it by rewriting
  the manifest (one atomic rename); until then the old generation stays published and readable.
- Generations share one Chroma collection. A document whose hash is the stored one is unchanged:
  not chunked, not embedded. A changed chunk is written under a new key (``<chunk id>#<hash>``)
  beside its old row, so both generations' rows coexist; a reader keeps only the dense hits whose
  key is a row of its own generation (:meth:`~sleuth.index.lexical.LexicalIndex.row_of_key`).
- The rows a new generation dropped (replaced or deleted documents) are listed in ``stale.json``
  and deleted when the next update (or repair) starts, so a reader opened before an update finds
  them while it runs and after it; a reader still open across two updates loses those dense hits.
- An interrupted update leaves the old generation published; ``pending.json`` lists the keys it
  writes, so a rerun reuses the rows already embedded and ``repair`` deletes them.
- The lexical side is rebuilt from the rows in memory (the old generation's kept rows plus the
  new ones): no Chroma read, no embedding. bm25s has no incremental update (every score depends
  on corpus-wide document frequencies and the mean length), so its index is built again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sleuth.corpus.models import Chunk, Document
from sleuth.index.fields import document_metadata
from sleuth.index.lexical import ChunkRow, LexicalIndex, Stamp
from sleuth.io import atomic_write_text

PENDING = "pending.json"
STALE = "stale.json"
_PAGE = 5000


def chunk_sha(chunk: Chunk) -> str:
    """What a stored chunk must match to be kept as is (text and metadata)."""
    payload = json.dumps([chunk.text, chunk.metadata], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(payload.encode()).hexdigest()


def document_sha(doc: Document) -> str:
    """What a stored document must match to be skipped by an update (title, text, metadata)."""
    payload = json.dumps(
        [doc.title, doc.text, doc.metadata], sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha1(payload.encode()).hexdigest()


def fingerprint(docs: Sequence[Document], settings: dict[str, object]) -> str:
    """Identifies an ingest's inputs, so an interrupted one is resumed only by the same."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for d in docs:
        h.update(d.id.encode() + b"\0" + hashlib.sha1(d.text.encode()).digest())
    return h.hexdigest()


def lexical_dir(generation: int) -> str:
    return f"lexical-{generation}"


@dataclass
class Plan:
    """An update: documents by fate, the chunks to write (Chroma key, chunk), the new rows of the
    added and replaced documents, and the Chroma keys the new generation no longer uses."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    writes: list[tuple[str, Chunk]] = field(default_factory=list)
    rows: list[ChunkRow] = field(default_factory=list)
    doc_meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    doc_sha: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)

    def chunks_given(self, old: LexicalIndex) -> int:
        """Chunks of the documents given (the unchanged ones counted from the old generation)."""
        kept = sum(len(old.rows_of_doc.get(d, ())) for d in self.unchanged)
        return len(self.rows) + kept


def plan_update(
    old: LexicalIndex,
    docs: Sequence[Document],
    chunker: Callable[[Document], list[Chunk]],
    delete_missing: bool = False,
    remove: Iterable[str] = (),
) -> Plan:
    """Compare ``docs`` with the published generation ``old``; ``chunker`` is called only for
    documents whose hash differs (or was never stored: older indexes compare chunk hashes)."""
    plan = Plan()
    for doc in docs:
        sha = document_sha(doc)
        stored = old.doc_sha.get(doc.id)
        if stored == sha:
            plan.unchanged.append(doc.id)
            continue
        chunks = chunker(doc)
        old_rows = [old.rows[i] for i in old.rows_of_doc.get(doc.id, ())]
        new_rows = _rows(plan, chunks, {r.id: r for r in old_rows})
        if stored is None and old_rows and [r.sha for r in old_rows] == [r.sha for r in new_rows]:
            plan.unchanged.append(doc.id)  # an older index: same chunks, hash now stored
        else:
            (plan.replaced if old_rows else plan.added).append(doc.id)
        plan.rows += new_rows
        plan.doc_sha[doc.id] = sha
        if chunks:
            plan.doc_meta[doc.id] = document_metadata(chunks[0].metadata)
        kept = {r.key or r.id for r in new_rows}
        plan.dropped += [k for r in old_rows if (k := r.key or r.id) not in kept]
    given = {d.id for d in docs}
    gone = [d for d in old.rows_of_doc if d not in given] if delete_missing else []
    gone += [d for d in remove if d in old.rows_of_doc and d not in given]
    for doc_id in dict.fromkeys(gone):
        plan.deleted.append(doc_id)
        plan.dropped += [old.rows[i].key or old.rows[i].id for i in old.rows_of_doc[doc_id]]
    return plan


def _rows(plan: Plan, chunks: list[Chunk], old: dict[str, ChunkRow]) -> list[ChunkRow]:
    """The rows of one document's new chunks: an old row with the same hash is kept as is; a
    changed one gets a key its old row does not use, and is queued for writing."""
    rows = []
    for c in chunks:
        sha, was = chunk_sha(c), old.get(c.id)
        if was is not None and was.sha == sha:
            rows.append(was)
            continue
        key = c.id if was is None or was.key else f"{c.id}#{sha[:12]}"
        plan.writes.append((key, c))
        title = c.metadata.get("title")
        rows.append(
            ChunkRow(
                c.id,
                c.doc_id,
                c.idx,
                c.text,
                c.tokens,
                title if isinstance(title, str) else "",
                sha,
                "" if key == c.id else key,
            )
        )
    return rows


def next_lexical(old: LexicalIndex, plan: Plan, stamp: Stamp) -> LexicalIndex:
    """The next generation's lexical side: the old rows of documents the plan leaves alone plus
    its new rows (BM25 and grep built again over them; nothing read from Chroma)."""
    drop = set(plan.doc_sha) | set(plan.deleted)  # documents chunked again, or gone
    rows = [r for r in old.rows if r.doc_id not in drop] + plan.rows
    meta = {d: m for d, m in old.doc_meta.items() if d not in drop} | plan.doc_meta
    sha = {d: s for d, s in old.doc_sha.items() if d not in drop} | plan.doc_sha
    return LexicalIndex.build(rows, stamp, meta, sha, previous=(old, drop))


# -- bookkeeping files -------------------------------------------------------------------
def write_pending(path: Path, doc_ids: list[str], keys: list[str]) -> None:
    atomic_write_text(path / PENDING, json.dumps({"docs": doc_ids, "keys": keys}))


def read_pending(path: Path) -> tuple[list[str], list[str]]:
    """The document ids and Chroma keys of an interrupted ingest (older ones: ids only)."""
    try:
        data = json.loads((path / PENDING).read_text())
    except (OSError, ValueError):
        return [], []
    if isinstance(data, list):
        return data, []
    return list(data.get("docs", [])), list(data.get("keys", []))


def write_stale(path: Path, generation: int, keys: list[str]) -> None:
    """The keys ``generation`` dropped (written before the manifest names that generation)."""
    atomic_write_text(path / STALE, json.dumps({"generation": generation, "keys": keys}))


def read_stale(path: Path, generation: int | None = None) -> list[str]:
    """Keys dropped by a generation up to ``generation`` (any, when None)."""
    try:
        data = json.loads((path / STALE).read_text())
        fresh = generation is not None and int(data["generation"]) > generation
        return [] if fresh else [str(k) for k in data["keys"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def delete_keys(collection: Any, keys: Iterable[str], live: LexicalIndex | None) -> None:
    """Delete these Chroma rows, never one the published generation ``live`` uses."""
    doomed = [k for k in dict.fromkeys(keys) if live is None or live.row_of_key(k) is None]
    for i in range(0, len(doomed), _PAGE):
        collection.delete(ids=doomed[i : i + _PAGE])


def prune_lexical(path: Path, keep: set[str]) -> None:
    """Remove generation folders other than ``keep`` (the published one and its predecessor,
    which a reader opening meanwhile may still load)."""
    for p in path.glob("lexical*"):
        if p.is_dir() and p.name not in keep and not p.name.startswith("lexical.tmp"):
            shutil.rmtree(p, ignore_errors=True)


def unstored(collection: Any, writes: list[tuple[str, Chunk]]) -> list[tuple[str, Chunk]]:
    """Writes not already in Chroma with the same content (a resumed or repeated update)."""
    stored: dict[str, str | None] = {}
    for i in range(0, len(writes), _PAGE):
        got = collection.get(ids=[k for k, _ in writes[i : i + _PAGE]], include=["metadatas"])
        for key, meta in zip(got["ids"], got["metadatas"], strict=True):
            stored[key] = (meta or {}).get("sha")
    return [(k, c) for k, c in writes if stored.get(k, "") != chunk_sha(c)]


def read_back(collection: Any, skip: set[str], stamp: Stamp) -> LexicalIndex:
    """A lexical side from the rows in Chroma, less the keys in ``skip`` (other generations')."""
    rows: list[ChunkRow] = []
    doc_meta: dict[str, dict[str, Any]] = {}
    total, offset = collection.count(), 0
    while offset < total:
        got = collection.get(include=["documents", "metadatas"], limit=_PAGE, offset=offset)
        for key, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            if key in skip:
                continue
            doc, idx = meta["doc_id"], int(meta["idx"])
            cid = f"{doc}_{idx}"
            title, sha = str(meta.get("title") or ""), str(meta.get("sha") or "")
            key = "" if key == cid else key
            rows.append(ChunkRow(cid, doc, idx, text, int(meta["tokens"]), title, sha, key))
            if idx == 0:
                doc_meta[doc] = document_metadata(meta)
        offset += _PAGE
    return LexicalIndex.build(rows, stamp, doc_meta)
