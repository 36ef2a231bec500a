"""The lexical side as it was saved before columns (format 4: JSON per row), for tests that an
index written then still opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sleuth.index.columns import HEADER
from sleuth.index.lexical import JSONL_FORMAT, LexicalIndex


def to_jsonl(folder: Path, row: Any = None, stamp: Any = None) -> LexicalIndex:
    """Rewrite the columnar side in ``folder`` as format 4 wrote it; ``row`` maps each row's
    dict (to simulate older rows), ``stamp`` the stamp. Returns the side as it was."""
    lexical = LexicalIndex.load(folder)
    assert lexical is not None
    rows, doc_meta, doc_sha = list(lexical.rows), dict(lexical.doc_meta), dict(lexical.doc_sha)
    for name in json.loads((folder / HEADER).read_text())["sizes"]:
        (folder / name).unlink()
    (folder / HEADER).unlink()
    with open(folder / "chunks.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            record = r.__dict__ if row is None else row(dict(r.__dict__))
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    with open(folder / "docmeta.jsonl", "w", encoding="utf-8") as f:
        for doc, meta in doc_meta.items():
            f.write(json.dumps([doc, meta], ensure_ascii=False) + "\n")
    (folder / "docsha.json").write_text(json.dumps(doc_sha), encoding="utf-8")
    old = {**lexical.stamp, "format": JSONL_FORMAT} if stamp is None else stamp
    (folder / "stamp.json").write_text(json.dumps(old))
    return LexicalIndex(rows, lexical.stamp, doc_meta=doc_meta, doc_sha=doc_sha)
