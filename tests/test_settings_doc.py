"""``docs/TRAINING_SETTINGS.md`` is generated from the training config classes (each field, its
default and the first line of its docstring; each recipe's value beside the default), so it
cannot drift from them. Regenerate: ``SLEUTH_WRITE_DOCS=1 pytest tests/test_settings_doc.py``."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import os
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sleuth.train.adapt import AdaptConfig
from sleuth.train.model import StudentConfig
from sleuth.train.ranker import RankerTrainConfig
from sleuth.train.recipes.config import RECIPES, RecipeConfig
from sleuth.train.rl_types import RLConfig
from sleuth.train.sft import SFTConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "TRAINING_SETTINGS.md"
SECTIONS = (
    ("`sleuth train sft` (`SFTConfig`)", SFTConfig),
    ("the student of `sft`, `rl` and recipes (`StudentConfig`)", StudentConfig),
    ("`sleuth train rl` (`RLConfig`; `--preset cpu-small` is `RLConfig.cpu_small`)", RLConfig),
    ("`sleuth train recipe NAME` (`RecipeConfig`, `sleuth.train.recipes.config`)", RecipeConfig),
    ("`sleuth train ranker` (`RankerTrainConfig`, `sleuth.train.ranker`)", RankerTrainConfig),
    ("`sleuth adapt` (`AdaptConfig`, `sleuth.train.adapt`; docs/ADAPT.md)", AdaptConfig),
)


def field_docs(cls: type) -> dict[str, str]:
    """The first paragraph of each field's docstring (the string right after its annotation),
    on one line."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            first = str(after.value.value).strip().split("\n\n")[0]
            docs[node.target.id] = " ".join(first.split()).replace("|", "\\|")
    return docs


def _value(value: Any) -> str:
    if dataclasses.is_dataclass(value) or isinstance(value, BaseModel):
        return f"`{type(value).__name__}()`"
    return f"`{value!r}`"


def render() -> str:
    lines = [
        "# Training settings",
        "",
        "Generated from the config classes by `tests/test_settings_doc.py` (which fails when this",
        "file is stale). Each setting has its one default here; a command's option left out takes",
        "it, and a recipe overrides only what differs (the reasons are in",
        "`src/sleuth/train/recipes/config.py`).",
    ]
    for title, cls in SECTIONS:
        docs = field_docs(cls)
        recipe = cls is RecipeConfig
        head = ["setting", "default", *(f"`{n}`" for n in RECIPES if recipe), "what"]
        lines += ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = _value(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = _value(f.default_factory())
            else:
                default = "—"
            cells = [f"`{f.name}`", default]
            if recipe:
                cells += [_value(getattr(r, f.name)) for r in RECIPES.values()]
            lines.append("| " + " | ".join([*cells, docs.get(f.name, "")]) + " |")
    return "\n".join(lines) + "\n"


def test_the_training_settings_doc_is_generated_from_the_config_classes():
    text = render()
    if os.environ.get("SLEUTH_WRITE_DOCS"):
        DOC.write_text(text, "utf-8")
    assert DOC.read_text("utf-8") == text, "stale: SLEUTH_WRITE_DOCS=1 pytest " + __file__
