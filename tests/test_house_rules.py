"""The house rules a newcomer relies on: a short README, short benchmark scripts, short functions."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_README_LINES = 150
MAX_BENCHMARK_LINES = 300
MAX_FUNCTION_LINES = 80


def test_readme_is_a_users_guide_not_a_notebook():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_no_benchmark_script_over_300_lines():
    long = {
        p.name: n
        for p in (ROOT / "benchmarks").glob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_BENCHMARK_LINES
    }
    assert not long, f"split these benchmark scripts: {long}"


def test_no_function_over_80_lines():
    long = []
    for folder in ("src", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        long.append(f"{path.relative_to(ROOT)}:{node.name} ({length})")
    assert not long, f"split these functions: {long}"


def test_nothing_stray_is_tracked_at_the_top():
    """A test that writes into the working folder once got its output committed: keep the top
    of the repository to what belongs there."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    top = {f.split(b"/")[0].decode("utf-8", "replace") for f in files if f}
    allowed = {".ci", ".gitignore", "README.md", "pyproject.toml", "benchmarks", "docs", "src"}
    assert top <= allowed | {"tests"}, f"stray tracked paths: {sorted(top - allowed - {'tests'})}"


def test_no_package_module_over_500_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "src").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert not long, f"split these modules: {long}"


def test_mypy_is_strict_over_every_module():
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    exempt = [o["module"] for o in mypy.get("overrides", []) if o.get("ignore_errors")]
    assert mypy["strict"] and mypy["files"] == ["src/sleuth"] and not exempt, exempt
