"""The command line: JSON shapes, and bad input → one line on stderr, exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def sleuth(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    docs = root / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {
                    "id": "paris",
                    "text": "Paris is the capital and largest city of France.",
                    "title": "Paris",
                },
                {
                    "id": "berlin",
                    "text": "Berlin is the capital of Germany, on the Spree.",
                    "title": "Berlin",
                },
                {
                    "id": "rome",
                    "text": "Rome was founded, legend says, in 753 BC.",
                    "title": "Rome",
                },
            ]
        )
        + "\n"
    )
    proc = sleuth("ingest", str(docs), "--index", str(root / "ix"), "--embedder", "hash", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["index_chunks"] == 3
    return root / "ix"


def test_tools_json_shapes(cli_index):
    hits = json.loads(
        sleuth("tools", "search", "capital of France", "--index", str(cli_index), "--json").stdout
    )
    assert hits[0]["id"] == "paris_0" and set(hits[0]) == {
        "id",
        "doc_id",
        "text",
        "tokens",
        "score",
    }
    excluded = json.loads(
        sleuth(
            "tools",
            "search",
            "capital of France",
            "--index",
            str(cli_index),
            "--exclude",
            "paris_0",
            "--json",
        ).stdout
    )
    assert "paris_0" not in [h["id"] for h in excluded]
    grep = json.loads(
        sleuth("tools", "grep", r"\d{3} BC", "--index", str(cli_index), "--json").stdout
    )
    assert [h["id"] for h in grep] == ["rome_0"] and grep[0]["score"] is None
    read = json.loads(sleuth("tools", "read", "berlin", "--index", str(cli_index), "--json").stdout)
    assert [h["id"] for h in read] == ["berlin_0"]


def test_tool_error_is_reported_in_json(cli_index):
    proc = sleuth("tools", "grep", "(unclosed", "--index", str(cli_index), "--json")
    assert proc.returncode == 1
    assert "invalid regular expression" in json.loads(proc.stdout)[-1]["error"]


def test_run_json_shape(cli_index, tmp_path):
    traj = tmp_path / "t.jsonl"
    proc = sleuth(
        "run",
        "capital of Germany",
        "--index",
        str(cli_index),
        "--policy",
        "single-pass",
        "--trajectory",
        str(traj),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"documents", "trajectory", "turns", "tool_calls", "peak_tokens"} <= set(out)
    assert out["documents"][0] == {
        "id": "berlin",
        "rank": 1,
        "justification": out["documents"][0]["justification"],
    }
    assert traj.exists() and out["trajectory"] == str(traj)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "{missing}", "--index", "{tmp}/ix"], "no such file"),
        (["ingest", "{bad}", "--index", "{tmp}/ix"], "missing 'id'"),
        (["tools", "search", "x", "--index", "{tmp}/nothing"], "not a sleuth index"),
        (["ingest", "{good}", "--index", "{tmp}/ix2", "--format", "nonsense"], "unknown format"),
    ],
)
def test_bad_input_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "x"}\n{"text": "no id"}\n')
    (tmp_path / "good.jsonl").write_text('{"id": "a", "text": "x"}\n')
    subs = {
        "{missing}": str(tmp_path / "missing.jsonl"),
        "{bad}": str(tmp_path / "bad.jsonl"),
        "{good}": str(tmp_path / "good.jsonl"),
        "{tmp}": str(tmp_path),
    }
    argv = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        argv.append(a)
    proc = sleuth(*argv)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "ix").exists() and not (tmp_path / "ix2").exists()
