"""SFT then CISPO end to end on a tiny random model over a small real index (hash embedder).

The scripted teacher searches with the query and lists what it saw. A short full fine-tune
teaches the tiny model that format (its loss must fall), so its sampled rollouts differ in
reward and RL has groups to learn from. Two RL steps then run, the second one crashes after it
was logged and before it was checkpointed, and the run resumes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
import torch

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import HarnessConfig
from sleuth.index import Index
from sleuth.policies.local_hf import tools_system_text
from sleuth.policies.scripted import ScriptedPolicy, call, turn
from sleuth.tasks import read_2wiki
from sleuth.tasks.schema import Task
from sleuth.tools.schemas import TOOL_SCHEMAS
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.train.model import StudentConfig
from sleuth.train.rl import RLConfig, minibatches, run_rl
from sleuth.train.runlog import read_log
from sleuth.train.sft import SFTConfig, SFTReport, run_sft
from sleuth.train.sft_filter import SFTFilterConfig
from sleuth.train.tiny import build_tiny_model, sample_corpus

os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_TASKS = 6
SYSTEM = "Find the documents that answer the query. Do not answer it."
HARNESS = HarnessConfig(
    budget=BudgetConfig(total=3072, per_call_tokens=640, reply_reserve=128, max_turns=2),
    max_reply_tokens=40,
    max_documents=2,
    system_prompt=SYSTEM,
)
_QUERY = re.compile(r"<query>(.*)</query>", re.DOTALL)
_SHOWN = re.compile(r"# DOCUMENT ID: (\S+)_\d+ ")


def teacher_script(messages: list[dict], index: int):
    """Turn 0: search with the query. Turn 1: list the documents just shown, best first."""
    if index == 0:
        return turn(call("search_corpus", query=_QUERY.search(messages[1]["content"]).group(1)))
    docs = list(dict.fromkeys(_SHOWN.findall(str(messages[-1]["content"]))))[:2]
    return "".join(_answer(d) for d in docs)


def _answer(doc_id: str) -> str:
    return f'<Document id="{doc_id}"><Justification>Shown.</Justification></Document>'



@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Task], Toolbox, Path]:
    """Six 2Wiki questions, their pooled paragraphs in a hash-embedded index, a tiny model."""
    root = tmp_path_factory.mktemp("rl")
    shipped = resources.files("sleuth").joinpath(
        "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"
    )
    sample = root / "2wiki.jsonl"
    sample.write_text("".join(shipped.read_text("utf-8").splitlines(True)[:N_TASKS]), "utf-8")
    docs, tasks = read_2wiki(sample)
    index = Index.create(root / "index", embedder="hash:64", chunk_tokens=48, overlap_tokens=8)
    index.ingest(docs)
    tools = Toolbox(Index.open(root / "index"), ToolConfig(search_max_chunks=2))
    texts = [SYSTEM, tools_system_text(TOOL_SCHEMAS), _answer("x"), *(d.text for d in docs)]
    texts += sample_corpus()
    model = build_tiny_model(root / "tiny", vocab_size=2048, corpus_texts=texts)
    return tasks, tools, model


@pytest.fixture(scope="module")
def sft(world, tmp_path_factory: pytest.TempPathFactory) -> tuple[SFTReport, Path]:
    tasks, tools, model = world
    out = tmp_path_factory.mktemp("sft")
    config = SFTConfig(
        student=StudentConfig(path=str(model), lora=False),
        out_dir=str(out),
        lr=1e-2,
        epochs=8,
        batch_size=3,
        micro_batch_size=3,
        max_seq_len=2048,
        harness=HARNESS,
        rollout_workers=2,
        filter=SFTFilterConfig(zero_max_share=0.9),  # the hash embedder often misses gold
    )
    report = run_sft(config, tasks, tools, lambda seed: ScriptedPolicy(teacher_script))
    return report, out


def test_sft_fine_tune_lowers_the_loss_on_kept_sequences(sft) -> None:
    report, out = sft
    assert report.filter.total == N_TASKS and report.sequences == report.filter.kept > 0
    assert report.loss_after < 0.5 * report.loss_before
    assert (out / "model" / "config.json").exists()  # a full model, loadable by LocalHFPolicy
    assert (out / "sft_report.json").exists() and (out / "sft_log.png").exists()


def _crash_at(step: int):
    def hook(s: int, record: dict) -> None:
        if s == step:
            raise RuntimeError("simulated crash")

    return hook


def _adam_steps(checkpoint: Path) -> float:
    state = torch.load(checkpoint / "optimizer.pt", weights_only=False)["state"]
    return float(next(iter(state.values()))["step"])


def test_two_rl_steps_checkpoint_crash_and_resume(world, sft, tmp_path: Path) -> None:
    tasks, tools, _ = world
    _, sft_out = sft
    config = RLConfig(
        student=StudentConfig(path=str(sft_out / "model"), lora=True, lora_r=8, lora_alpha=16),
        out_dir=str(tmp_path),
        queries_per_step=2,
        rollouts_per_query=3,
        substeps=2,
        micro_batch_size=2,
        epochs=2,
        max_steps=2,
        lr=1e-3,
        harness=HARNESS,
        rollout_workers=2,
        max_seq_len=2048,
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_rl(config, tasks, tools, on_step=_crash_at(1))
    checkpoints = tmp_path / "checkpoints"
    assert (checkpoints / "LATEST").read_text().strip() == "step_000001"
    assert (checkpoints / "step_000001" / "model" / "adapter_config.json").exists()
    crashed = read_log(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in crashed] == [0, 1]  # step 1 was logged, never checkpointed
    first = crashed[0]
    assert first["groups/kept"] >= 1, "the warmed-up model must give some group a reward spread"
    assert first["train/optimizer_steps"] == 2
    assert first["train/ratio_mean_substep0"] == pytest.approx(1.0, abs=1e-3)
    assert first["beta"] == 4.0 and crashed[1]["beta"] == 2.0
    steps_at_1 = _adam_steps(checkpoints / "step_000001")

    log = run_rl(config, tasks, tools)  # resume

    assert [r["step"] for r in log] == [0, 1]  # the redone step replaced the orphan line
    assert log[1]["reward/total"] == pytest.approx(crashed[1]["reward/total"])  # redone exactly
    state = json.loads((checkpoints / "step_000002" / "state.json").read_text())
    assert state["step"] == 2 and state["config"]["queries_per_step"] == 2
    expected = steps_at_1 + log[1].get("train/optimizer_steps", 0.0)
    assert _adam_steps(checkpoints / "step_000002") == expected  # the optimiser state continued
    rollouts = read_log(tmp_path / "rollouts.jsonl")
    assert [r["step"] for r in rollouts] == [0] * 6 + [1] * 6
    assert (tmp_path / "metrics.png").exists()
    for key in ("reward/f_beta", "reward/turn_penalty", "metrics/recall", "train/entropy"):
        assert key in log[0]


def test_a_finished_run_resumes_to_nothing(world, sft, tmp_path: Path) -> None:
    tasks, tools, _ = world
    _, sft_out = sft
    config = RLConfig(
        student=StudentConfig(path=str(sft_out / "model"), lora_r=4),
        out_dir=str(tmp_path),
        queries_per_step=1,
        rollouts_per_query=2,
        max_steps=1,
        harness=replace(HARNESS, max_reply_tokens=8),
    )
    assert [r["step"] for r in run_rl(config, tasks, tools)] == [0]
    assert [r["step"] for r in run_rl(config, tasks, tools)] == [0]


def test_minibatches_split_evenly_and_keep_every_item() -> None:
    parts = minibatches(list(range(10)), 4, seed=0)  # type: ignore[arg-type]
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert sorted(x for p in parts for x in p) == list(range(10))
    assert len(minibatches(list(range(2)), 4, seed=0)) == 2  # never an empty minibatch
