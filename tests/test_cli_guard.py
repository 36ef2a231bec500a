"""Every option of every command, bad values included: one line on stderr, never a traceback.

The option list is generated from the typer app itself, so an option added tomorrow is
covered the day it is added; the property tests feed arbitrary JSON values into each field of an
ingest record and into the options of ``score``, ``eval`` and ``run``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import shutil
import typing
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.corpus.models import Document
from sleuth.eval import run_eval
from sleuth.harness import run_query
from sleuth.index import Index
from sleuth.io import LOCK_FILE
from sleuth.policies import make_policy
from sleuth.tasks import save_tasks
from sleuth.tools.toolbox import Toolbox
from tests.test_cli_validation import QUIET
from tests.test_eval import make_tasks

# -- the options, from the app ------------------------------------------------------------


def _commands(group: typer.Typer, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple, Any]]:
    """(command path, callback) of every command of ``group`` and its sub-groups."""
    for info in group.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        yield (*path, name), info.callback
    for sub in group.registered_groups:
        yield from _commands(sub.typer_instance, (*path, sub.name))


def _base_type(annotation: Any) -> Any:
    """``int`` of ``Annotated[int | None, ...]``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return (
        args[0] if typing.get_origin(annotation) in (typing.Union, type(int | None)) else annotation
    )


def _option_name(param: inspect.Parameter, annotation: Any) -> str | None:
    """The ``--name`` of an option (None for an argument)."""
    infos = [a for a in typing.get_args(annotation) if isinstance(a, typer.models.ParameterInfo)]
    info = infos[0] if infos else param.default
    if isinstance(info, typer.models.ArgumentInfo) or not isinstance(info, typer.models.OptionInfo):
        return None
    given = (info.default, *(info.param_decls or ()))  # Option("--json") keeps it as default
    decls = [d for d in given if isinstance(d, str) and d.startswith("--")]
    return decls[0] if decls else "--" + param.name.replace("_", "-")


BAD_OF_TYPE = {int: "twelve", float: "a lot", bool: "maybe"}  # what its type cannot parse


def typed_options() -> list[tuple[tuple, str, str]]:
    """(command path, option, bad value) for every numeric option and flag of every command."""
    rows = []
    for path, callback in _commands(app):
        hints = typing.get_type_hints(callback, include_extras=True)
        for param in inspect.signature(callback).parameters.values():
            name = _option_name(param, hints[param.name])
            bad = BAD_OF_TYPE.get(_base_type(hints[param.name]))
            if name is not None and bad is not None:
                rows.append((path, name, bad))
    return rows


OPTIONS = typed_options()


def test_the_guard_sees_the_options_it_must():
    names = {(" ".join(p), o) for p, o, _ in OPTIONS}
    assert {("eval", "--limit"), ("score", "--beta"), ("ingest", "--batch-size")} <= names
    assert {("serve mcp", "--port"), ("ingest", "--repair"), ("run", "--json")} <= names
    assert len(OPTIONS) > 60


@pytest.mark.parametrize(
    ("path", "option", "bad"), OPTIONS, ids=[f"{' '.join(p)} {o}" for p, o, _ in OPTIONS]
)
def test_every_option_with_a_bad_value_is_one_line_exit_2(tmp_path, monkeypatch, path, option, bad):
    monkeypatch.chdir(tmp_path)
    given = [f"{option}={bad}"] if bad == BAD_OF_TYPE[bool] else [option, bad]  # a flag takes none
    result = CliRunner().invoke(app, [*path, *given])
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_are_one_line_too():
    for argv in (["bogus"], ["tools", "search"], ["score", "--nope", "1"]):
        result = CliRunner().invoke(app, argv)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ")


# -- arbitrary JSON into records and options ------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
FAST = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A small index, a task, a trajectory and an ingest record to vary."""
    root = tmp_path_factory.mktemp("fuzz")
    docs = [Document(id="paris", text="Paris is the capital of France.", title="Paris")]
    Index.create(root / "ix", embedder="hash:64").ingest(docs)
    save_tasks(root / "tasks.jsonl", make_tasks()[:1])
    run_query(
        Toolbox(Index.open(root / "ix")),
        "capital of France",
        policy=make_policy("single-pass"),
        trajectory=root / "traj.jsonl",
    )
    run_eval(make_tasks()[:1], "single-pass", Toolbox(Index.open(root / "ix")), root / "ev", QUIET)
    return root


def _snapshot(folder: Path) -> dict[str, str]:
    """What a refused command must leave as it was (Chroma's own files: their names only)."""
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        if p.is_file() and "chroma" not in p.parts
        else "-"
        for p in sorted(folder.rglob("*"))
        if p.name != LOCK_FILE
    }


def _invoke_clean(argv: list[str], watched: Path) -> int:
    """Run the CLI; exit 0, or exit 2 with one line and ``watched`` unchanged."""
    before = _snapshot(watched) if watched.exists() else None
    sandbox = watched if watched.is_dir() else watched.parent
    sandbox.mkdir(parents=True, exist_ok=True)
    with contextlib.chdir(sandbox):  # a relative path a value names lands here, not in the repo
        result = CliRunner().invoke(app, argv)
    assert not isinstance(result.exception, Exception), result.exception  # no traceback
    assert result.exit_code in (0, 2), (argv, result.stderr)
    if result.exit_code == 2:
        lines = [ln for ln in result.stderr.splitlines() if ln.strip().startswith("error: ")]
        others = [ln for ln in result.stderr.splitlines() if ln.strip() and ln not in lines]
        assert len(lines) == 1 and not [o for o in others if "Traceback" in o], result.stderr
        assert (_snapshot(watched) if watched.exists() else None) == before
    return result.exit_code


def _as_option(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


RECORD = {"id": "doc", "text": "Rivers run to the sea.", "title": "Rivers", "metadata": {"k": 1}}


@pytest.mark.parametrize(
    "field", ["id", "text", "title", "metadata", "metadata value", "metadata key"]
)
@FAST
@given(value=JSON)
def test_any_json_in_an_ingest_record_is_indexed_or_refused_in_one_line(
    root, tmp_path, field, value
):
    record = dict(RECORD)
    if field == "metadata value":
        record["metadata"] = {"k": value}
    elif field == "metadata key":
        record["metadata"] = {_as_option(value): 1}
    else:
        record[field] = value
    work = tmp_path / uuid.uuid4().hex
    shutil.copytree(root / "ix", work / "ix")
    (work / "doc.jsonl").write_text(json.dumps(record) + "\n")
    argv = ["ingest", str(work / "doc.jsonl"), "--index", str(work / "ix"), "--embedder", "hash:64"]
    _invoke_clean(argv, work / "ix")


OPTION_VALUES = st.one_of(
    JSON, st.sampled_from(["-1", "0", "nan", "inf", "1e400", "", "\x00", "/proc/x"])
)


@pytest.mark.parametrize(
    ("command", "option"),
    [("score", o) for o in ("--beta", "--task-id", "--task", "--trajectory")]
    + [("eval", o) for o in ("--limit", "--concurrency", "--rollouts", "--fuse", "--beta")]
    + [("eval", o) for o in ("--max-reply-tokens", "--tasks", "--out")]
    + [("run", o) for o in ("--budget", "--max-turns", "--policy", "--format", "--engine")]
    + [("run", o) for o in ("--reranker", "--trajectory", "--ranker")],
)
@FAST
@given(value=OPTION_VALUES)
def test_any_value_of_an_option_runs_or_is_refused_in_one_line(
    root, tmp_path, command, option, value
):
    work = tmp_path / uuid.uuid4().hex
    work.mkdir()
    base = {
        "score": [
            "score",
            "--task",
            str(root / "tasks.jsonl"),
            "--trajectory",
            str(root / "traj.jsonl"),
        ],
        "eval": ["eval", "--index", str(root / "ix"), "--tasks", str(root / "tasks.jsonl")]
        + ["--out", str(work / "ev"), "--policy", "single-pass"],
        "run": ["run", "capital of France", "--index", str(root / "ix"), "--policy", "single-pass"]
        + ["--trajectory", str(work / "t.jsonl")],
    }[command]
    if option in base:  # the varied option replaces the base's own
        i = base.index(option)
        base = base[:i] + base[i + 2 :]
    _invoke_clean([*base, option, _as_option(value)], work)
