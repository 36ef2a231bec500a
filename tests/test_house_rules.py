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
