"""One default per setting: a training command's option has no default of its own (None: the
config class's) or reads it from a named constant, a recipe's setting reads its default from the
library's config class, and a preset overrides only what differs, each override with a reason.

A literal equal to a config field's default is that default written twice: the two drift apart
the day one of them changes.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
from pathlib import Path
from typing import Any

import pytest

import sleuth
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.reward import RewardConfig
from sleuth.tools.toolbox import ToolConfig
from sleuth.train.adapt import AdaptConfig
from sleuth.train.model import StudentConfig
from sleuth.train.ranker import RankerTrainConfig
from sleuth.train.recipes.config import RecipeConfig
from sleuth.train.rl_types import RLConfig
from sleuth.train.sft import SFTConfig

SRC = Path(sleuth.__file__).parent
CONFIGS = (
    SFTConfig,
    RLConfig,
    StudentConfig,
    RewardConfig,
    HarnessConfig,
    BudgetConfig,
    ToolConfig,
    RankerTrainConfig,
    AdaptConfig,
)
ALIASES = {  # CLI option -> the config field it sets
    "rollouts": "rollouts_per_query",
    "engine": "rollout_engine",
    "credit_malformed": "credit_malformed_list",
}


def _defaults(field: str) -> dict[str, Any]:
    """Each config class's default of ``field`` (those that have the field)."""
    found = {}
    for cls in CONFIGS:
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                if f.name == field and f.default is not dataclasses.MISSING:
                    found[cls.__name__] = f.default
        elif field in getattr(cls, "model_fields", {}):
            found[cls.__name__] = cls.model_fields[field].default
    return found


def _twice(name: str, node: ast.expr | None) -> list[str]:
    if not isinstance(node, ast.Constant) or node.value is None:
        return []  # no default, None (the config's), or read from a name
    if node.value is False:
        return []  # a switch is off until given: the flag's nature, not a setting's value
    field = ALIASES.get(name, name)
    return [
        f"{name} = {node.value!r} repeats {cls}.{field}"
        for cls, value in _defaults(field).items()
        if type(value) is type(node.value) and value == node.value
    ]


@pytest.mark.parametrize("module", ["train.py", "adapt.py"])
def test_no_training_option_repeats_a_config_default(module):
    tree = ast.parse((SRC / "cli" / module).read_text("utf-8"))
    found = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        args = fn.args.args[len(fn.args.args) - len(fn.args.defaults) :]
        found += [e for a, d in zip(args, fn.args.defaults, strict=True) for e in _twice(a.arg, d)]
    assert found == []


def test_the_check_catches_a_repeated_literal():
    assert _twice("lr", ast.Constant(SFTConfig.lr)) == [
        f"lr = {SFTConfig.lr!r} repeats SFTConfig.lr"
    ]
    assert _twice("lr", ast.Name("LEARNING_RATE")) == []


def _recipe_tree() -> tuple[str, ast.Module]:
    text = (SRC / "train" / "recipes" / "config.py").read_text("utf-8")
    return text, ast.parse(text)


def test_recipe_settings_read_their_defaults_from_the_library():
    _, tree = _recipe_tree()
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RecipeConfig")
    found = [
        e
        for n in body.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        for e in _twice(n.target.id, n.value)
    ]
    assert found == []


@pytest.mark.parametrize("preset", ["CPU_SMALL", "CUDA", "SMOKE"])
def test_presets_override_only_what_differs_and_say_why(preset):
    text, tree = _recipe_tree()
    call = next(
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and n.targets[0].id == preset  # type: ignore[attr-defined]
    )
    assert isinstance(call, ast.Call)
    comments = {
        t.start[0]
        for t in tokenize.generate_tokens(io.StringIO(text).readline)
        if t.type == tokenize.COMMENT
    }
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(RecipeConfig)
        if f.default is not dataclasses.MISSING
    }
    for kw in call.keywords:
        if kw.arg not in defaults:
            continue  # a size every preset states
        assert ast.literal_eval(kw.value) != defaults[kw.arg], f"{preset}.{kw.arg} is the default"
        assert {kw.lineno, kw.lineno - 1} & comments, f"{preset}.{kw.arg} gives no reason"
