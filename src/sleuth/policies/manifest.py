"""A trained adapter's manifest, ``sleuth_policy.json``: what it needs to run as it was trained.

A small model learns one prompt, one budget, one reply length and one search order; run under
others it degrades. Every training entry point (``sleuth train sft``, ``sleuth train rl``,
``sleuth train recipe``) writes a :class:`PolicyManifest` beside the weights, and
``--policy local[:PATH]`` reads it back (:func:`read_manifest`), so an adapter runs unflagged
under the settings it trained under. A manifest written before ``schema_version`` existed (the
learning curve's, schema 0) still loads; a newer one is refused with a message that says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sleuth.errors import InputError
from sleuth.harness.loop import HarnessConfig
from sleuth.io import atomic_write_text
from sleuth.tools.spec import ORIGINAL_TOOLS, TOOL_NAMES

MANIFEST = "sleuth_policy.json"
"""The manifest's file name inside an adapter folder."""
MANIFEST_SCHEMA_VERSION = 1
FINAL_LISTS = ("model", "selector")
"""Who writes a local model's final list: its own reply, or the learned selector."""
FinalList = Literal["model", "selector"]


class HarnessSettings(BaseModel):
    """The harness limits and prompt the policy was trained under."""

    model_config = ConfigDict(extra="forbid")

    budget: int
    """T, the context budget in tokens."""
    per_call_tokens: int
    reply_reserve: int
    max_turns: int
    max_reply_tokens: int | None
    """The cap on one reply (None: T - X, the report's)."""
    max_documents: int
    """Length of the final list asked for."""
    system_prompt: str | None
    """The system prompt (None: the built-in Context-1 prompt)."""

    @classmethod
    def of(cls, config: HarnessConfig) -> HarnessSettings:
        b = config.budget
        return cls(
            budget=b.total,
            per_call_tokens=b.per_call_tokens,
            reply_reserve=b.reply_reserve,
            max_turns=b.max_turns,
            max_reply_tokens=config.max_reply_tokens,
            max_documents=config.max_documents,
            system_prompt=config.system_prompt,
        )

    def apply(self, base: HarnessConfig) -> HarnessConfig:
        """``base`` under these settings (the report's thresholds recomputed for this T)."""
        budget = replace(
            base.budget,
            total=self.budget,
            per_call_tokens=self.per_call_tokens,
            reply_reserve=self.reply_reserve,
            max_turns=self.max_turns,
            soft_threshold=None,
            hard_cutoff=None,
        )
        return replace(
            base,
            budget=budget,
            max_reply_tokens=self.max_reply_tokens,
            max_documents=self.max_documents,
            system_prompt=self.system_prompt,
        )


class ToolSettings(BaseModel):
    """How the tools searched while it trained."""

    model_config = ConfigDict(extra="forbid")

    search_max_chunks: int
    ranker: bool
    """Ranked search: the learned ranker reranked ``search_corpus`` (the shipped one at run
    time, when the tools have none)."""


class PolicyManifest(BaseModel):
    """``sleuth_policy.json``: the settings an adapter trained under, and what it trained on."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = MANIFEST_SCHEMA_VERSION
    """0: written before the manifest was versioned (no ``base_model``, ``tool_names``)."""
    harness: HarnessSettings
    tools: ToolSettings
    final_list: FinalList = "model"
    base_model: str | None = None
    """The model the adapter was trained over (a path or a name)."""
    tool_names: list[str] | None = None
    """The tools it was shown, in order (None: schema 0, trained before ``describe_corpus``:
    the original four, :data:`sleuth.tools.spec.ORIGINAL_TOOLS`)."""
    phase: str | None = None
    """``sft`` or ``rl``."""
    trained_with: str | None = None
    """The command that trained it."""
    task_source: str | None = None
    trained_task_ids: list[str] = []
    held_out_task_ids: list[str] = []
    """Ids a recipe kept out of training to evaluate on."""
    preset: dict[str, Any] | None = None
    """The recipe's settings, when a recipe trained it."""

    @field_validator("schema_version")
    @classmethod
    def _known(cls, v: int) -> int:
        if v > MANIFEST_SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v} is newer than supported {MANIFEST_SCHEMA_VERSION}; "
                "upgrade sleuth to read it"
            )
        return v

    @field_validator("final_list", mode="before")
    @classmethod
    def _final_list(cls, v: Any) -> Any:
        if v not in FINAL_LISTS:
            raise ValueError(f"final_list {v!r} unknown; use one of {FINAL_LISTS}")
        return v

    @classmethod
    def of_training(
        cls,
        harness: HarnessConfig,
        search_max_chunks: int,
        ranker: bool,
        base_model: str,
        task_ids: Sequence[str],
        phase: str,
        **extra: Any,
    ) -> PolicyManifest:
        """The manifest of a training run (every field not given keeps its default)."""
        return cls(
            harness=HarnessSettings.of(harness),
            tools=ToolSettings(search_max_chunks=search_max_chunks, ranker=ranker),
            base_model=base_model,
            tool_names=list(harness.tools),
            phase=phase,
            trained_task_ids=sorted(task_ids),
            **extra,
        )

    @property
    def trained_tools(self) -> tuple[str, ...]:
        """The tool set to offer it: the one it trained with."""
        return tuple(self.tool_names) if self.tool_names is not None else ORIGINAL_TOOLS

    def unknown_tools(self) -> list[str]:
        """Tools it trained with that this sleuth does not have."""
        return [t for t in self.trained_tools if t not in TOOL_NAMES]

    def apply(self, base: HarnessConfig) -> HarnessConfig:
        """``base`` under the trained harness settings and tool set."""
        return replace(self.harness.apply(base), tools=self.trained_tools)


def write_manifest(folder: str | Path, manifest: PolicyManifest) -> Path:
    """Write ``manifest`` into the adapter ``folder`` (atomically); returns its path."""
    path = Path(folder) / MANIFEST
    atomic_write_text(path, manifest.model_dump_json(indent=2))
    return path


def read_manifest(adapter: str | Path | None) -> PolicyManifest | None:
    """The manifest of an adapter folder; None when it has none.

    Raises:
        InputError: the file is not a manifest (the message names each field at fault).
    """
    path = Path(adapter) / MANIFEST if adapter else None
    if path is None or not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"not a policy manifest ({e})", source=str(path)) from e
    if isinstance(raw, dict):
        raw.setdefault("schema_version", 0)  # written before the manifest was versioned
    try:
        return PolicyManifest.model_validate(raw)
    except ValidationError as e:
        faults = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in e.errors()
        )
        raise InputError(f"not a policy manifest: {faults}", source=str(path)) from e
