"""An adapter's manifest (``sleuth_policy.json``) is one typed record: old ones load, newer ones
are refused, and what it says is what ``--policy local`` runs under."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth.errors import InputError
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.policies.manifest import (
    MANIFEST,
    MANIFEST_SCHEMA_VERSION,
    HarnessSettings,
    PolicyManifest,
    read_manifest,
    write_manifest,
)
from sleuth.policies.spec import shipped_adapter
from sleuth.tools.spec import TOOL_NAMES

SHIPPED = Path(__file__).resolve().parents[1] / "src/sleuth/data/adapters/smollm2-sleuth"


def test_the_shipped_unversioned_manifest_still_loads_typed():
    raw = json.loads((SHIPPED / MANIFEST).read_text("utf-8"))
    assert "schema_version" not in raw  # written by the learning curve before it was typed
    manifest = read_manifest(SHIPPED)
    assert manifest is not None and manifest.schema_version == 0
    assert manifest.final_list == "selector" and manifest.tools.ranker is True
    assert manifest.harness.budget == raw["harness"]["budget"] == 2304
    assert manifest.harness.system_prompt == raw["harness"]["system_prompt"]
    assert manifest.trained_task_ids == raw["trained_task_ids"]
    assert manifest.tool_names is None and manifest.base_model is None
    if shipped_adapter() is not None:
        assert read_manifest(shipped_adapter()) == manifest


def test_a_written_manifest_reads_back_equal_and_is_versioned(tmp_path):
    harness = HarnessConfig(
        budget=BudgetConfig(total=4096, per_call_tokens=512, max_turns=4),
        max_reply_tokens=200,
        max_documents=7,
        system_prompt="Find things.",
    )
    manifest = PolicyManifest.of_training(
        harness, 3, True, "base.gguf", ["b", "a"], "sft", final_list="selector"
    )
    write_manifest(tmp_path, manifest)
    back = read_manifest(tmp_path)
    assert back == manifest and back.schema_version == MANIFEST_SCHEMA_VERSION
    assert back.trained_task_ids == ["a", "b"] and back.tool_names == TOOL_NAMES
    applied = back.harness.apply(HarnessConfig(max_reply_tokens=2048))
    assert HarnessSettings.of(applied) == back.harness
    assert applied.budget.soft_threshold == 2048  # the report's thresholds, for this T


def test_no_manifest_is_none_and_bad_or_newer_ones_are_refused_in_one_line(tmp_path):
    assert read_manifest(tmp_path) is None and read_manifest(None) is None
    good = json.loads((SHIPPED / MANIFEST).read_text("utf-8"))
    (tmp_path / MANIFEST).write_text(json.dumps({**good, "schema_version": 99}))
    with pytest.raises(InputError, match="newer than supported"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({**good, "harness": {"budget": "big"}}))
    with pytest.raises(InputError, match=r"not a policy manifest: harness\.budget") as caught:
        read_manifest(tmp_path)
    assert "\n" not in str(caught.value).split(": ", 1)[1].split("Input should")[0]


def test_an_adapter_trained_with_other_tools_is_refused_before_its_weights_load(tmp_path):
    from sleuth.policies.spec import PolicyOptions, build_policy

    manifest = read_manifest(SHIPPED).model_copy(update={"tool_names": ["search", "read"]})
    write_manifest(tmp_path, manifest)
    with pytest.raises(InputError, match="trained with the tools"):  # no weights read
        build_policy(f"local:{tmp_path}", PolicyOptions(adapter=str(tmp_path)))
