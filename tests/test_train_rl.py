"""SFT and CISPO end to end on a tiny random model over a small real index (hash embedder).

* SFT: a scripted teacher (search with the query, list what it saw) runs through the harness,
  the filter keeps its runs, and a short full fine-tune lowers the loss on the kept sequences.
* RL: two CISPO steps on the random model; the second crashes after it is logged and before it
  is checkpointed, and the run resumes. A random model finds nothing, so every group's rewards
  are equal; the test keeps such groups (negative tolerance) so the whole update path runs, and
  a separate test checks that an update with real advantages moves log-probs the right way.
"""

from __future__ import annotations

import importlib.util
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
from sleuth.policies.chatml import tools_system_text
from sleuth.policies.manifest import read_manifest
from sleuth.policies.scripted import ScriptedPolicy, call, turn
from sleuth.tasks import read_2wiki
from sleuth.tasks.schema import Task
from sleuth.tools.spec import TOOL_SCHEMAS
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.train.model import StudentConfig, build_optimizer, load_student
from sleuth.train.rl import run_rl
from sleuth.train.rl_types import RLConfig, TrainItem
from sleuth.train.rl_update import advantage_scales, cispo_update, minibatches
from sleuth.train.rollout import collect_rollouts_ray
from sleuth.train.runlog import read_log
from sleuth.train.sequences import TrainSequence, collate_sequences, sequence_logprobs
from sleuth.train.sft import SFTConfig, run_sft
from sleuth.train.sft_filter import SFTFilterConfig
from sleuth.train.tiny import build_tiny_model, sample_corpus

os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_TASKS = 4
SYSTEM = "Find the documents that answer the query. Do not answer it."
HARNESS = HarnessConfig(
    budget=BudgetConfig(total=3072, per_call_tokens=640, reply_reserve=128, max_turns=2),
    max_reply_tokens=16,
    max_documents=2,
    system_prompt=SYSTEM,
)
_QUERY = re.compile(r"<query>(.*)</query>", re.DOTALL)
_SHOWN = re.compile(r"# DOCUMENT ID: (\S+)_\d+ ")


def _answer(doc_id: str) -> str:
    return f'<Document id="{doc_id}"><Justification>Shown.</Justification></Document>'


def teacher_script(messages: list[dict], index: int):
    """Turn 0: search with the query. Turn 1: list the documents just shown, best first."""
    if index == 0:
        return turn(call("search_corpus", query=_QUERY.search(messages[1]["content"]).group(1)))
    docs = list(dict.fromkeys(_SHOWN.findall(str(messages[-1]["content"]))))[:2]
    return "".join(_answer(d) for d in docs)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Task], Toolbox, Path]:
    """Four 2Wiki questions, their pooled paragraphs in a hash-embedded index, a tiny model
    whose tokenizer was trained on the prompt, the tool schemas and the corpus."""
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
    model = build_tiny_model(root / "tiny", vocab_size=2048, corpus_texts=texts + sample_corpus())
    return tasks, tools, model


def test_sft_fine_tune_lowers_the_loss_on_kept_sequences(world, tmp_path: Path) -> None:
    tasks, tools, model = world
    config = SFTConfig(
        student=StudentConfig(path=str(model), lora=False),
        out_dir=str(tmp_path),
        lr=3e-3,
        epochs=2,
        batch_size=4,
        micro_batch_size=2,
        max_seq_len=2048,
        harness=HARNESS,
        rollout_workers=2,
        filter=SFTFilterConfig(zero_max_share=0.9),  # the hash embedder often misses gold
    )
    report = run_sft(config, tasks, tools, lambda seed: ScriptedPolicy(teacher_script))
    assert report.filter.total == N_TASKS and report.sequences == report.filter.kept > 0
    assert report.steps == 2 and report.loss_after < report.loss_before
    assert (tmp_path / "model" / "config.json").exists()  # a full model, loadable as a policy
    assert len(list((tmp_path / "teacher").glob("*.jsonl"))) == N_TASKS
    assert json.loads((tmp_path / "sft_report.json").read_text())["steps"] == 2
    again = run_sft(config, tasks, tools, lambda seed: ScriptedPolicy([]))  # nothing re-run
    assert again.steps == 2 and again.loss_before == report.loss_before


def _crash_at(step: int):
    def hook(s: int, record: dict) -> None:
        if s == step:
            raise RuntimeError("simulated crash")

    return hook


def _adam_steps(checkpoint: Path) -> float:
    state = torch.load(checkpoint / "optimizer.pt", weights_only=False)["state"]
    return float(next(iter(state.values()))["step"])


def test_two_rl_steps_checkpoint_crash_and_resume(world, tmp_path: Path) -> None:
    tasks, tools, model = world
    config = RLConfig(
        student=StudentConfig(path=str(model), lora=True, lora_r=4, lora_alpha=8),
        out_dir=str(tmp_path),
        queries_per_step=2,
        rollouts_per_query=2,
        substeps=2,
        micro_batch_size=2,
        epochs=2,
        max_steps=2,
        lr=1e-3,
        zero_variance_tol=-1.0,  # keep constant groups so the update runs (see module doc)
        harness=HARNESS,
        rollout_workers=2,
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_rl(config, tasks, tools, on_step=_crash_at(1))
    checkpoints = tmp_path / "checkpoints"
    assert (checkpoints / "LATEST").read_text().strip() == "step_000001"
    assert (checkpoints / "step_000001" / "model" / "adapter_config.json").exists()
    crashed = read_log(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in crashed] == [0, 1]  # step 1 was logged, never checkpointed
    first = crashed[0]
    assert first["groups/kept"] == 2 and first["train/optimizer_steps"] == 2
    assert first["train/ratio_mean_substep0"] == pytest.approx(1.0, abs=1e-3)
    assert first["beta"] == 4.0 and crashed[1]["beta"] == 2.0  # annealed across the 2 epochs
    for key in ("reward/f_beta", "reward/turn_penalty", "metrics/recall", "train/entropy"):
        assert key in first
    steps_at_1 = _adam_steps(checkpoints / "step_000001")
    assert steps_at_1 == 2

    log = run_rl(config, tasks, tools)  # resume after the crash

    assert [r["step"] for r in log] == [0, 1]  # the redone step replaced the orphan line
    assert log[1]["throughput/sampled_tokens"] == crashed[1]["throughput/sampled_tokens"]
    state = json.loads((checkpoints / "step_000002" / "state.json").read_text())
    assert state["step"] == 2 and state["config"]["queries_per_step"] == 2
    assert _adam_steps(checkpoints / "step_000002") == 4  # the optimiser state continued
    manifest = read_manifest(checkpoints / "step_000002" / "model")  # runs as it trained
    assert manifest is not None and manifest.phase == "rl" and manifest.harness.max_turns == 2
    rollouts = read_log(tmp_path / "rollouts.jsonl")
    assert [r["step"] for r in rollouts] == [0] * 4 + [1] * 4
    assert (tmp_path / "metrics.png").exists()
    assert [r["step"] for r in run_rl(config, tasks, tools)] == [0, 1]  # finished: no new step


def _item(ids: list[int], advantage: float, group: int) -> TrainItem:
    n = len(ids)
    mask = (0, 0) + (1,) * (n - 2)
    return TrainItem(TrainSequence(tuple(ids), mask, (0.0,) * n, (0,)), advantage, group)


def test_a_cispo_update_moves_log_probs_with_the_advantage(world, tmp_path: Path) -> None:
    _, _, model_dir = world
    config = RLConfig(
        student=StudentConfig(path=str(model_dir), lora=True, lora_r=4),
        out_dir=str(tmp_path),
        substeps=2,
        lr=1e-2,
        anchor="recompute",  # behaviour log-probs from the current weights
    )
    model, _ = load_student(config.student)
    good, bad = [5, 9, 17, 33, 65, 129], [7, 11, 19, 37, 71, 131]
    items = [_item(good, 1.0, 0), _item(bad, -1.0, 0)]

    def logp() -> list[float]:
        batch = collate_sequences([it.sequence for it in items])
        with torch.no_grad():
            lp, _ = sequence_logprobs(model, batch.input_ids)
        return (lp * batch.loss_mask).sum(dim=1).tolist()

    before = logp()
    stats = cispo_update(model, build_optimizer(model, config.lr), items, config, 0, seed=0)
    after = logp()
    assert after[0] > before[0] and after[1] < before[1]
    assert stats["ratio_mean_substep0"] == pytest.approx(1.0, abs=1e-5)  # recomputed anchor
    assert stats["optimizer_steps"] == 2
    with_kl = replace(config, kl_coef=0.1)  # reference: the same model with the adapter off
    kl_stats = cispo_update(model, build_optimizer(model, 1e-2), items, with_kl, 0, seed=1)
    assert kl_stats["kl"] > 0.0  # the adapter has moved away from the base


def test_minibatches_split_evenly_and_advantage_scales_match_the_aggregation() -> None:
    parts = minibatches(list(range(10)), 4, seed=0)  # type: ignore[arg-type]
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert sorted(x for p in parts for x in p) == list(range(10))
    assert len(minibatches(list(range(2)), 4, seed=0)) == 2  # never an empty minibatch
    items = [_item([1, 2, 3, 4], 1.0, 0), _item([1, 2, 3], 1.0, 0), _item([1] * 6, 1.0, 1)]
    # targets: 2 + 1 tokens in group 0, 4 in group 1
    assert advantage_scales(items, "token_sum") == [1.0, 1.0, 1.0]
    assert advantage_scales(items, "token_mean") == [1 / 7] * 3
    assert advantage_scales(items, "prompt_mean") == [1 / 6, 1 / 6, 1 / 8]  # 1 / (groups x tokens)


def test_configs_refuse_settings_that_cannot_work() -> None:
    small = RLConfig.cpu_small("model-dir")
    assert (small.queries_per_step, small.rollouts_per_query, small.student.lora) == (4, 4, True)
    with pytest.raises(ValueError, match="at least 2"):
        RLConfig(rollouts_per_query=1)  # no group to compare against
    with pytest.raises(ValueError, match="LoRA"):
        RLConfig(student=StudentConfig(lora=False), kl_coef=0.1)  # no base to compare against
    with pytest.raises(ValueError, match="multiple"):
        SFTConfig(batch_size=3, micro_batch_size=2)


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="ray is installed")
def test_ray_rollouts_name_the_install_command_when_ray_is_missing() -> None:
    with pytest.raises(ImportError, match="pip install"):
        collect_rollouts_ray(lambda: None, lambda: None, HARNESS, [], 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(("flag", "credited"), [([], True), (["--no-credit-malformed"], False)])
def test_train_rl_cli_passes_the_malformed_list_setting_to_the_reward(
    tmp_path, monkeypatch, flag, credited
):
    from typer.testing import CliRunner

    from sleuth.cli import app

    seen: list[RLConfig] = []
    monkeypatch.setattr("sleuth.cli.common.open_toolbox", lambda index: None)
    monkeypatch.setattr("sleuth.tasks.load_tasks", lambda path: [])
    monkeypatch.setattr("sleuth.train.rl.run_rl", lambda config, *a, **k: seen.append(config) or [])
    argv = ["train", "rl", "--index", "ix", "--tasks", "t.jsonl", "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(app, argv + flag)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert [c.reward.credit_malformed_list for c in seen] == [credited]


def test_an_adapter_trained_by_the_cli_runs_unflagged_under_its_trained_settings(
    world, tmp_path: Path
) -> None:
    """``sleuth train sft`` writes the manifest; ``local:BASE --adapter`` reads it back."""
    from typer.testing import CliRunner

    from sleuth.cli import app
    from sleuth.policies.spec import PolicyOptions, build_policy

    tasks, tools, model = world
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks), "utf-8")
    out = tmp_path / "sft"
    argv = ["train", "sft", "--index", str(tools.index.path), "--tasks", str(task_file)]
    argv += ["--out", str(out), "--model", str(model), "--epochs", "1", "--lora-r", "4"]
    argv += ["--budget", "3072", "--max-turns", "2", "--max-seq-len", "2048"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, (result.stderr, result.exception)
    manifest = read_manifest(out / "model")
    assert manifest is not None and manifest.schema_version == 1 and manifest.phase == "sft"
    assert manifest.base_model == str(model)
    assert manifest.trained_task_ids == sorted(t.id for t in tasks)
    assert manifest.tools.ranker  # the heuristic teacher searched with the learned ranker
    assert (manifest.harness.budget, manifest.harness.max_turns) == (3072, 2)
    assert manifest.harness.max_reply_tokens == 512 and manifest.final_list == "model"

    built = build_policy(
        f"local:{model}", PolicyOptions(adapter=str(out / "model"), engine="transformers")
    )
    config = built.harness(HarnessConfig())  # `sleuth run`'s defaults: T = 32k, 128 turns
    assert (config.budget.total, config.budget.max_turns) == (3072, 2)
    assert config.max_reply_tokens == 512 and config.system_prompt is None
    plain = Toolbox(tools.index, ToolConfig(search_max_chunks=7))
    wrapped = built.tools(plain)
    assert isinstance(wrapped, Toolbox) and wrapped.ranker is not None
    assert wrapped.config.search_max_chunks == manifest.tools.search_max_chunks
