"""benchmarks/_scale_lexical.py's serve phase times the lexical side the index's manifest names,
as it is on disk: a side saved without its id look-ups is not upgraded by the measurement."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sleuth.corpus.models import Document
from sleuth.index import Index

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import _corpus  # noqa: E402
import _grep_scale  # noqa: E402
import _scale_lexical  # noqa: E402

DOCS = [
    Document(id=f"d{i}", title=f"Title {i}", text=f"alpha beta{i} gamma {i} delta. " * 30)
    for i in range(12)
]


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_serve_phase_opens_the_manifests_side_without_rewriting_it(tmp_path, monkeypatch):
    Index.create(tmp_path / "ix", embedder="hash:64", chunk_tokens=32).ingest(DOCS)
    chunks = len(Index.open(tmp_path / "ix").lexical.rows)
    side = _scale_lexical.index_lexical(tmp_path / "ix")
    assert side == tmp_path / "ix" / "lexical-1" and (side / "stamp.json").exists()
    header = json.loads((side / "columns.json").read_text())
    for name in ("id", "doc"):  # as saved before the look-ups were: load(upgrade) adds them
        for part in ("hash", "order"):
            (side / f"{name}_{part}.npy").unlink()
            del header["sizes"][f"{name}_{part}.npy"]
    (side / "columns.json").write_text(json.dumps(header))
    before = _files(side)
    monkeypatch.setattr(_corpus, "questions", lambda n: ["alpha gamma", "beta3 delta"][:n])
    monkeypatch.setattr(_grep_scale, "grep_patterns", lambda base, k: {"w": [r"beta\d"]})
    out = _scale_lexical.phase_lexserve(side, 2)
    assert out["chunks"] == chunks > len(DOCS) and out["read_document"]["n"] == len(DOCS)
    assert _files(side) == before
