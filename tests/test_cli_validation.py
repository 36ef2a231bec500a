"""Bad input on the command line: one line on stderr, exit code 2, nothing written.

Table-driven over every bad-input case we know of. The CLI runs
in process (typer's runner), so the table costs one import of sleuth, not one per row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.corpus.models import Document
from sleuth.eval import EvalConfig, run_eval
from sleuth.harness import run_query
from sleuth.index import Index
from sleuth.index.manifest import MANIFEST
from sleuth.io import LOCK_FILE, folder_lock
from sleuth.policies import make_policy, spec
from sleuth.tasks import save_tasks
from sleuth.tools.toolbox import Toolbox
from tests.test_eval import make_tasks

QUIET = EvalConfig(progress=False)


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
    _issue_28_inputs(root)
    return root


def _issue_28_inputs(root: Path) -> None:
    """The files of the bad-input cases: odd ingest records, broken trajectories and results."""
    records = {
        "surrogate": '{"id": "a", "text": "bad \\ud800 text"}',
        "reserved": '{"id": "a", "text": "x", "metadata": {"chroma:document": "y"}}',
        "dicttitle": '{"id": "a", "text": "x", "title": {"x": 1}}',
        "listid": '{"id": ["a", "b"], "text": "x"}',
        "onechar": '{"id": "a", "text": "y"}',
    }
    for name, line in records.items():
        (root / f"{name}.jsonl").write_text(line + "\n")
    (root / "garbage.jsonl").write_text("{not json\n")
    (root / "binary.jsonl").write_bytes(bytes(range(256)))
    (root / "empty.jsonl").write_text("")
    run_query(
        Toolbox(Index.open(root / "ix")),
        "capital of France",
        policy=make_policy("single-pass"),
        trajectory=root / "traj.jsonl",
    )
    tasks = make_tasks()[:1]
    run_eval(tasks, "single-pass", Toolbox(Index.open(root / "ix")), root / "ev", QUIET)
    results = root / "ev" / "results.jsonl"
    results.write_text("garbage\n" + results.read_text())


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
    ([*INGEST_GOOD, "--index", "new", "--delete-missing"], "no documents yet"),
    ([*INGEST_GOOD, "--index", "ix", "--repair", "--delete-missing"], "cannot be combined"),
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
    (
        [
            "train",
            "ranker",
            "--index",
            "ix",
            "--tasks",
            "tasks.jsonl",
            "--out",
            "new.json",
            "--learner",
            "forest",
        ],
        "learner 'forest'",
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
    (["datagen", "offline", "--index", "ix", "--out", "t.jsonl", "--chains", "1,3"], "--chains"),
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


# Each case, its exit code, a word of its one stderr line, and what it may write
# (case 12, the size of MCP replies, is in test_mcp_server: it needs the MCP client).
SCORE = ["score", "--task", "tasks.jsonl", "--trajectory"]
EVAL = ["eval", "--index", "ix", "--tasks", "tasks.jsonl", "--policy", "single-pass", "--out"]
RUN = ["run", "capital of France", "--index", "ix", "--policy", "single-pass"]
DEAD = ["--model", "m", "--base-url", "{dead}"]
ISSUE_28 = [
    (
        "1 lone surrogate",
        ["ingest", "surrogate.jsonl", "--index", "new", "--embedder", "hash:64"],
        0,
        "lone surrogates replaced by U+FFFD",
        ("new",),
    ),
    (
        "2 reserved key",
        ["ingest", "reserved.jsonl", "--index", "new", "--embedder", "hash:64"],
        2,
        "'chroma:document' is reserved",
        (),
    ),
    ("3 title", ["ingest", "dicttitle.jsonl", "--index", "new"], 2, "'title' must be a string", ()),
    ("3 id", ["ingest", "listid.jsonl", "--index", "new"], 2, "'id' must be a string", ()),
    (
        "4 one letter",
        ["ingest", "onechar.jsonl", "--index", "new", "--embedder", "hash:64"],
        0,
        "indexed 1 documents / 1 chunks",
        ("new",),
    ),
    (
        "5 dead chroma",
        [*INGEST_GOOD, "--index", "new", "--chroma-url", "{dead}"],
        2,
        "no Chroma server answers",
        (),
    ),
    (
        "5 not a url",
        [*INGEST_GOOD, "--index", "new", "--chroma-url", "not a url"],
        2,
        "give http://HOST:PORT",
        (),
    ),
    (
        "6 repair nothing",
        ["ingest", "good.jsonl", "--index", "nowhere", "--repair"],
        2,
        "not a sleuth index",
        (),
    ),
    ("7 malformed", [*SCORE, "garbage.jsonl"], 2, "line 1 is not JSON", ()),
    ("7 binary", [*SCORE, "binary.jsonl"], 2, "not UTF-8", ()),
    ("7 missing", [*SCORE, "missing.jsonl"], 2, "cannot read", ()),
    ("7 beta nan", [*SCORE, "traj.jsonl", "--beta", "nan"], 2, "beta (nan)", ()),
    ("7 beta -2", [*SCORE, "traj.jsonl", "--beta", "-2"], 2, "beta (-2.0)", ()),
    ("8 garbage results", [*EVAL, "ev"], 2, "delete that line and rerun", ()),
    ("8 empty tasks", [*EVAL, "new", "--tasks", "empty.jsonl"], 2, "holds no tasks", ()),
    ("8 limit 0", [*EVAL, "new", "--limit", "0"], 2, "--limit", ()),
    ("9 /proc", [*RUN, "--trajectory", "/proc/version"], 2, "cannot create files in /proc", ()),
    ("9 reranker", [*RUN, "--reranker", "cross-encoder:/nonexistent"], 2, "no such folder", ()),
    ("10 demo out", ["demo", "--quick", "--out", "f.txt"], 2, "is a file", ()),
    (
        "10 demo policy",
        ["demo", "--quick", "--out", "new", "--policy", "bogus"],
        2,
        "unknown policy 'bogus'",
        (),
    ),
    (
        "11 busy port",
        ["serve", "mcp", "--index", "ix", "--http", "--port", "{busy}"],
        2,
        "Address already in use",
        (),
    ),
    (
        "13 run",
        ["run", "q", "--index", "ix", *DEAD, "--trajectory", "t.jsonl"],
        2,
        "never answered",
        ("t.jsonl",),
    ),
    (
        "13 eval",
        ["eval", "--index", "ix", "--tasks", "tasks.jsonl", "--out", "new", *DEAD],
        2,
        "every query failed",
        ("new",),
    ),
]


@pytest.fixture
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize(
    ("argv", "code", "message", "writes"), [c[1:] for c in ISSUE_28], ids=[c[0] for c in ISSUE_28]
)
def test_bad_input_cases(inputs, tmp_path, monkeypatch, busy_port, argv, code, message, writes):
    """Exit 2 with one line and nothing written; or (cases 1, 4) a clean success, and (13) a
    failed run that names the endpoint and the cause, with its trajectory written."""
    work = tmp_path / "w"
    shutil.copytree(inputs, work)
    monkeypatch.chdir(work)
    # an endpoint that never answers fails at once instead of after 4 retries
    monkeypatch.setattr(spec, "PolicyOptions", functools.partial(spec.PolicyOptions, max_retries=0))
    dead = f"http://127.0.0.1:{_dead_port()}"
    argv = [a.replace("{dead}", dead).replace("{busy}", str(busy_port)) for a in argv]
    before = _snapshot(work)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    assert not isinstance(result.exception, Exception)  # a SystemExit, never a crash
    if code == 0:
        assert message in result.stderr
        return
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    after = {k: v for k, v in _snapshot(work).items() if not k.startswith(writes or ("//",))}
    assert after == before
    if writes:
        assert dead in lines[0] and "Connection refused" in lines[0] and writes[0] in lines[0]


def test_second_datagen_run_into_one_folder_is_refused(inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(inputs)
    argv = ["datagen", "explore", "--run", str(tmp_path / "run"), "--index", "ix", "--model", "m"]
    with folder_lock(tmp_path / "run", "a datagen run"):
        result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "another sleuth process" in result.stderr
    assert [p.name for p in (tmp_path / "run").iterdir()] == [LOCK_FILE]
