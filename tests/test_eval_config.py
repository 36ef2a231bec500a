"""One config style: EvalConfig instead of run_eval's keyword arguments, and the
report's constants defined once."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import sleuth
from sleuth.errors import ConfigError, InputError
from sleuth.eval import EvalConfig, run_eval
from sleuth.harness.budget import BUDGET_TOKENS, MAX_TURNS, BudgetConfig
from sleuth.metrics import BETA
from sleuth.reward import RewardConfig
from tests.test_eval import KeywordTools, make_tasks


def test_eval_config_is_frozen_and_names_the_setting_to_fix():
    config = EvalConfig(concurrency=2, progress=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.concurrency = 3  # type: ignore[misc]
    for bad, name in [({"rollouts": 0}, "rollouts"), ({"beta": float("nan")}, "beta")]:
        with pytest.raises(ConfigError, match=name):
            EvalConfig(**bad)
    assert issubclass(ConfigError, InputError)


def test_run_eval_takes_a_config_not_its_fields(tmp_path):
    tasks = make_tasks()[:2]
    a = run_eval(tasks, "single-pass", KeywordTools(), tmp_path / "a", EvalConfig(progress=False))
    b = run_eval(
        tasks, "single-pass", KeywordTools(), tmp_path / "b", config=EvalConfig(progress=False)
    )
    with pytest.raises(TypeError):
        run_eval(tasks, "single-pass", KeywordTools(), tmp_path / "c", progress=False)  # type: ignore[call-arg]
    timing = {"wall_time_s"}
    assert {k: v for k, v in a.overall.items() if k not in timing} == {
        k: v for k, v in b.overall.items() if k not in timing
    }


def test_report_constants_are_defined_once():
    assert RewardConfig().beta == BETA == EvalConfig().beta == 4.0
    assert BudgetConfig().total == BUDGET_TOKENS and BudgetConfig().max_turns == MAX_TURNS
    cli = Path(sleuth.__file__).parent / "cli"
    retyped = [
        f"{p.name}: {m.group(0)}"
        for p in cli.glob("*.py")
        for m in re.finditer(r"= (32_?768|4\.0)\b", p.read_text())
    ]
    assert not retyped


def test_tool_config_is_frozen_and_checked():
    from sleuth.tools.toolbox import ToolConfig

    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolConfig().search_max_chunks = 3  # type: ignore[misc]
    with pytest.raises(ConfigError, match="search_max_chunks"):
        ToolConfig(search_max_chunks=0)
