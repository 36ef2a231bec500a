"""The learned text stage: fine-tuned from the installed MiniLM weights, offline; its loss falls;
its scores are deterministic; a bad stage folder is one line; the agent uses it only on request."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from sleuth.errors import InputError
from sleuth.policies import build_policy
from sleuth.policies.spec import PolicyOptions
from sleuth.ranking.selector import SEARCH_FLOOR
from sleuth.ranking.textstage import (
    INFO_FILE,
    ONNX_FILE,
    WEIGHTS_FILE,
    TextStage,
    TextStageInfo,
    export_int8,
    load_text_stage,
    read_info,
)
from sleuth.train.text_stage import Group, TextStageTrainConfig, train_text_stage

GROUPS = [
    Group(
        "Which city is the capital of France?",
        "Paris: Paris is the capital and largest city of France.",
        ("Banana: A banana is an elongated edible fruit.", "Oslo: Oslo is in Norway."),
    ),
    Group(
        "Who wrote the novel Moby-Dick?",
        "Moby-Dick: Moby-Dick is an 1851 novel by Herman Melville.",
        ("Tennis: Tennis is a racket sport.", "Violin: The violin is a string instrument."),
    ),
]
TINY = TextStageTrainConfig(
    max_tokens=16,
    negatives=2,
    groups_per_step=2,
    steps=3,
    lr=2e-4,
    scale_lr=1e-1,
    frozen_layers=5,
    threads=1,
    onnx=False,
)


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("stage")
    with pytest.MonkeyPatch.context() as mp:  # nothing may reach a hub
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        stats = train_text_stage(GROUPS, out, TINY, question_ids=["q1", "q2"])
    return out, stats


def test_a_tiny_fine_tune_lowers_the_loss(stage):
    _, stats = stage
    losses = stats["losses"]  # every step sees both groups, so the curve is comparable
    assert len(losses) == TINY.steps and losses[-1] < losses[0]


def test_the_stage_loads_from_its_folder_and_scores_deterministically(stage):
    folder, _ = stage
    info = read_info(folder)
    assert info.question_ids == ["q1", "q2"] and info.max_tokens == TINY.max_tokens
    one, two = TextStage(folder), load_text_stage(folder)
    passages = [GROUPS[0].positive, *GROUPS[0].negatives]
    first = one.score(GROUPS[0].question, passages)
    assert first.shape == (3,) and np.array_equal(first, one.score(GROUPS[0].question, passages))
    assert np.array_equal(first, two.score(GROUPS[0].question, passages))
    assert load_text_stage(folder) is two  # loaded once per process


def test_rerank_reorders_only_the_head_and_keeps_every_document(stage):
    folder, _ = stage
    texts = {"pos": GROUPS[0].positive, "a": GROUPS[0].negatives[0], "b": GROUPS[0].negatives[1]}
    ranked = [("a", 0.9), ("b", 0.5), ("pos", 0.4), ("tail", 0.1)]
    loaded = load_text_stage(folder)
    out = loaded.rerank(GROUPS[0].question, ranked, texts.get, top=3)
    assert sorted(out[:3]) == sorted(ranked[:3]) and out[3] == ("tail", 0.1)
    assert loaded.rerank("q", ranked[:1], texts.get) == ranked[:1]


def test_a_missing_or_corrupt_weight_file_is_one_line(stage, tmp_path):
    folder, _ = stage
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / WEIGHTS_FILE).write_bytes(b"not weights")
    with pytest.raises(InputError, match="does not match its checksum") as bad:
        TextStage(broken)
    (broken / WEIGHTS_FILE).unlink()
    with pytest.raises(InputError, match=f"missing {WEIGHTS_FILE}") as missing:
        load_text_stage(broken)
    for error in (bad, missing):
        assert "\n" not in str(error.value)


def test_heuristic_text_needs_a_stage_and_builds_with_one(stage):
    with pytest.raises(InputError, match="needs a text stage folder"):
        build_policy("heuristic-text")
    built = build_policy("heuristic-text", PolicyOptions(text_stage=str(stage[0])))
    assert built.factory(0).name == "heuristic-text"


def test_the_int8_export_scores_like_torch_and_is_checked(stage, tmp_path):
    folder = tmp_path / "exported"
    shutil.copytree(stage[0], folder)
    info = read_info(folder)
    info = TextStageInfo.model_validate(info.model_dump() | {"onnx_sha256": export_int8(folder)})
    (folder / INFO_FILE).write_text(info.model_dump_json())
    int8, fp32 = TextStage(folder), TextStage(folder, onnx=False)
    assert int8.session is not None and fp32.session is None
    group = GROUPS[1]
    passages = [group.positive, *group.negatives]
    a, b = int8.score(group.question, passages), fp32.score(group.question, passages)
    assert np.array_equal(a, int8.score(group.question, passages))
    assert np.abs(a - b).max() < 0.1 * (np.abs(b).max() + 1)
    (folder / ONNX_FILE).write_bytes(b"torn")
    with pytest.raises(InputError, match=f"{ONNX_FILE} does not match its checksum"):
        TextStage(folder)


class _ReversingStage:
    """Stands in for a trained stage: reverses the head and records what it read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    def rerank(self, question, ranked, text_of, top=10):
        self.read = [text_of(doc) for doc, _ in ranked[:top]]
        return list(reversed(ranked[:top])) + list(ranked[top:])


class _Titles:
    def title(self, doc_id: str) -> str:
        return f"Title {doc_id}"

    def floor(self) -> tuple[tuple[int, int], ...]:
        return SEARCH_FLOOR


def test_the_agent_orders_its_final_list_with_the_stage_only_beside_a_selector():
    from sleuth.policies.heuristic import HeuristicAgent

    ranked = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    stage = _ReversingStage()
    with_stage = HeuristicAgent(selector=_Titles(), text_stage=stage).answer("q?", ranked, [])
    assert re.findall(r'id="(\w+)"', with_stage) == ["c", "b", "a"]
    assert stage.read == ["Title a: ", "Title b: ", "Title c: "]
    plain = HeuristicAgent(text_stage=_ReversingStage()).answer("q?", ranked, [])
    assert re.findall(r'id="(\w+)"', plain) == ["a", "b", "c"]
