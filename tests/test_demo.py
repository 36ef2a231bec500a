"""`sleuth demo --quick` end to end, with the network unavailable to the process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from statistics import mean

import pytest

from sleuth.demo import TABLE_METRICS

GUARD = textwrap.dedent("""
    import os, socket
    _log = os.environ["SLEUTH_NET_LOG"]
    _connect = socket.socket.connect
    def _guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and not str(host).startswith(("127.", "::1", "localhost")):
            with open(_log, "a") as f:
                f.write(f"{host}\\n")
            raise OSError("network disabled by the sleuth demo test")
        return _connect(self, address)
    socket.socket.connect = _guarded
""")


def _unshare_works() -> bool:
    exe = shutil.which("unshare")
    return bool(exe) and subprocess.run([exe, "-n", "true"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    guard_dir = root / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD)
    env = {
        **os.environ,
        "SLEUTH_HOME": str(root / "home"),
        "SLEUTH_NET_LOG": str(root / "net.log"),
        "PYTHONPATH": os.pathsep.join([str(guard_dir), os.environ.get("PYTHONPATH", "")]),
        "COLUMNS": "140",
    }
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(var, None)  # the demo must be offline by itself
    cmd = [sys.executable, "-m", "sleuth.cli", "demo", "--quick", "--out", str(root / "out")]
    if _unshare_works():
        cmd = ["unshare", "-n", *cmd]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, proc


def test_demo_opened_no_network_socket(demo_run):
    root, _ = demo_run
    log = root / "net.log"
    assert not log.exists() or log.read_text() == ""


def test_demo_table_matches_per_query_results(demo_run):
    root, proc = demo_run
    out = root / "out"
    rows = json.loads((out / "demo_summary.json").read_text())
    assert {"single-pass", "heuristic"} < set(rows) and any("SmolLM2" in n for n in rows)
    for name, row in rows.items():
        folder = row["folder"]
        records = [
            json.loads(line) for line in (out / folder / "results.jsonl").read_text().splitlines()
        ]
        assert rows[name]["count"] == len(records) > 0
        for key in ("final_answer_found", "recall", "f1", "trajectory_recall", "turns"):
            expected = mean(float(r["metrics"][key]) for r in records)
            assert rows[name][key] == pytest.approx(expected)
        line = next(ln for ln in proc.stdout.splitlines() if ln.strip("│ ").startswith(name))
        cells = [c.strip() for c in line.strip("│").split("│")]
        shown = dict(zip(["policy", "n", *TABLE_METRICS], cells, strict=True))
        assert shown["recall"] == f"{rows[name]['recall']:.3f}"
        assert shown["final_answer_found"] == f"{rows[name]['final_answer_found']:.3f}"
        html = (out / folder / "report.html").read_text()
        assert "data:image/png;base64," in html and 'src="http' not in html


def test_demo_prints_an_example_trajectory_and_paths(demo_run):
    root, proc = demo_run
    assert "Example trajectory" in proc.stdout and "tokens in context" in proc.stdout
    assert str(root / "out" / "heuristic" / "report.html") in proc.stdout


def test_demo_never_scores_the_adapter_on_its_training_tasks():
    from sleuth.demo import DemoConfig, adapter_policy, choose

    manifest = adapter_policy()
    trained = set(manifest.trained_task_ids if manifest else [])
    assert trained, "the packaged adapter records the tasks it trained on"
    _, tasks, sub = choose(DemoConfig())
    assert sub and not {t.id for t in tasks + sub} & trained
