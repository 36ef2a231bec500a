"""Bad input on the command line: one line on stderr, exit code 2, nothing written.

Table-driven over every case of issue 13 item 7 (and the ingest cases of item 10). The CLI runs
in process (typer's runner), so the table costs one import of sleuth, not one per row.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.corpus.models import Document
from sleuth.index import Index
from sleuth.index.manifest import MANIFEST
from sleuth.io import LOCK_FILE, folder_lock
from sleuth.tasks import save_tasks
from tests.test_eval import make_tasks


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _with_manifest(folder: Path, **changes) -> None:
    path = folder / MANIFEST
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Every file and folder the table refers to, built once; each row works on a copy."""
    root = tmp_path_factory.mktemp("inputs")
    docs = [Document(id=f"d{i}", text=f"document {i} about rivers and towns.") for i in range(3)]
    Index.create(root / "ix", embedder="hash:64").ingest(docs)
    for name in ("notdb", "dimix", "nochroma"):
        shutil.copytree(root / "ix", root / name)
    (root / "notdb" / "chroma" / "chroma.sqlite3").write_bytes(b"not a database" * 64)
    _with_manifest(root / "dimix", embedder="hash:32")
    shutil.rmtree(root / "nochroma" / "chroma")
    for name, manifest in (("listix", "[1, 2]"), ("nokeys", '{"schema_version": 1}')):
        (root / name).mkdir()
        (root / name / MANIFEST).write_text(manifest)
    (root / "good.jsonl").write_text('{"id": "a", "text": "some text"}\n')
    (root / "emptykey.jsonl").write_text('{"id": "a", "text": "x", "metadata": {"": 1}}\n')
    (root / "nested.jsonl").write_text(
        '{"id": "a", "text": "x", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    )
    (root / "f.txt").write_text("a file")
    (root / "d").mkdir()
    save_tasks(root / "tasks.jsonl", make_tasks()[:1])
    return root


INGEST_GOOD = ["ingest", "good.jsonl", "--embedder", "hash:64"]
CASES = [
    (["ingest", "emptykey.jsonl", "--index", "ix", "--embedder", "hash:64"], "metadata key"),
    (["ingest", "nested.jsonl", "--index", "new"], "nested too deeply"),
    ([*INGEST_GOOD, "--index", "ix", "--batch-size", "100000"], "batch size 100000"),
    ([*INGEST_GOOD, "--index", "ix", "--batch-size", "-1"], "batch size -1"),
    ([*INGEST_GOOD, "--index", "ix", "--batch-size", "0"], "batch size 0"),
    (["ingest", "good.jsonl", "--index", "new", "--embedder", "hash:0"], "dimension"),
    (["ingest", "good.jsonl", "--index", "new", "--embedder", "st:/nonexistent"], "no sentence"),
    (["ingest", "good.jsonl", "--index", "new", "--embedder", "openai:m@{dead}"], "not usable"),
    ([*INGEST_GOOD, "--index", "new", "--chunk-tokens", "0"], "chunk tokens"),
    ([*INGEST_GOOD, "--index", "f.txt"], "is a file"),
    ([*INGEST_GOOD, "--index", "f.txt/sub"], "is a file"),
    (["tools", "search", "x", "--index", "f.txt"], "is a file"),
    (["tools", "search", "x", "--index", "listix"], "not a JSON object"),
    (["tools", "search", "x", "--index", "nokeys"], "Field required"),
    (["tools", "search", "x", "--index", "notdb"], "Chroma"),
    (["tools", "search", "x", "--index", "dimix"], "64 dimensions"),
    (["tools", "search", "x", "--index", "nochroma"], "damaged"),
    (
        [
            "train",
            "sft",
            "--index",
            "ix",
            "--tasks",
            "tasks.jsonl",
            "--out",
            "new",
            "--device",
            "bogus",
        ],
        "--device",
    ),
    (
        [
            "train",
            "rl",
            "--index",
            "ix",
            "--tasks",
            "tasks.jsonl",
            "--out",
            "new",
            "--aggregation",
            "bogus",
        ],
        "--aggregation",
    ),
    (["datagen", "explore", "--run", "f.txt", "--index", "ix", "--model", "m"], "--run is a file"),
    (["run", "q", "--index", "ix", "--model", "/nonexistent.gguf"], "no such local model"),
    (["run", "q", "--index", "ix", "--policy", "single-pass", "--trajectory", "d"], "is a folder"),
    (
        ["run", "q", "--index", "ix", "--policy", "single-pass", "--max-reply-tokens", "-5"],
        "--max-reply-tokens",
    ),
    (["eval", "--index", "ix", "--tasks", "tasks.jsonl", "--out", "f.txt"], "is a file"),
    (
        ["eval", "--index", "ix", "--tasks", "tasks.jsonl", "--out", "new", "--limit", "-1"],
        "--limit",
    ),
    (["eval", "--index", "ix", "--tasks", "tasks.jsonl", "--out", "new", "--beta", "nan"], "beta"),
    (["datagen", "offline", "--index", "ix", "--out", "d"], "is a folder"),
    (["datagen", "offline", "--index", "ix", "--out", "t.jsonl"], "no document has a title"),
    (["score", "--task", "tasks.jsonl", "--trajectory", "d"], "is a folder"),
    (["serve", "mcp", "--index", "ix", "--http", "--port", "70000"], "--port"),
]


def _snapshot(root: Path) -> dict[str, str]:
    """Every path, and the content hash of every file sleuth writes. Lock files hold no data, and
    Chroma rewrites its own files when merely opened for a search, so for ``chroma/`` only the
    paths count here (test_index_safety compares the chunks stored in it)."""
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
        if p.is_file() and "chroma" not in p.relative_to(root).parts
        else "-"
        for p in sorted(root.rglob("*"))
        if p.name != LOCK_FILE
    }


@pytest.mark.parametrize(
    ("argv", "message"), CASES, ids=[" ".join(a[:2]) + f" {m}" for a, m in CASES]
)
def test_bad_input_is_one_line_exit_2_nothing_written(inputs, tmp_path, monkeypatch, argv, message):
    work = tmp_path / "w"
    shutil.copytree(inputs, work)
    monkeypatch.chdir(work)
    argv = [a.replace("{dead}", f"http://127.0.0.1:{_dead_port()}/v1") for a in argv]
    before = _snapshot(work)
    result = CliRunner().invoke(app, argv)
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.stdout, result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    assert _snapshot(work) == before


def test_second_datagen_run_into_one_folder_is_refused(inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(inputs)
    argv = ["datagen", "explore", "--run", str(tmp_path / "run"), "--index", "ix", "--model", "m"]
    with folder_lock(tmp_path / "run", "a datagen run"):
        result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "another sleuth process" in result.stderr
    assert [p.name for p in (tmp_path / "run").iterdir()] == [LOCK_FILE]
