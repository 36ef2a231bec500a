"""The learning curve's task pools: held-out questions are evaluated and never trained on."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.tasks import Task
from sleuth.tasks.split import is_heldout
from sleuth.train.recipes import RECIPES, analysis, data, report, stages


def _tasks(prefix: str, n: int) -> list[Task]:
    return [
        Task(id=f"{prefix}-{i}", query=f"q {prefix} {i}", answer="a", gold_doc_ids=[f"d{i}"])
        for i in range(n)
    ]


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40), min_size=4, max_size=4),
    per_dataset=st.integers(0, 10),
    per_source=st.integers(0, 10),
    seed=st.integers(0, 5),
)
def test_pools_keep_held_out_questions_out_of_training(sizes, per_dataset, per_source, seed):
    names = ["HotpotQA", "MuSiQue", "2Wiki", data.SYNTHETIC]
    by_source = {name: _tasks(name, n) for name, n in zip(names, sizes, strict=True)}
    preset = RECIPES["smoke"]
    preset = type(preset)(
        **{**preset.__dict__, "heldout_per_dataset": per_dataset, "sft_per_source": per_source}
    )
    pools = data.task_pools(by_source, preset, seed)
    assert all(is_heldout(t.id) for t in pools["heldout"])
    assert not any(is_heldout(t.id) for t in pools["sft"] + pools["rl"])
    ids = {name: [t.id for t in pool] for name, pool in pools.items()}
    assert not set(ids["sft"]) & set(ids["rl"])
    assert not any(i.startswith(data.SYNTHETIC) for i in ids["heldout"])
    for name in names[:3]:
        held = [t for t in by_source[name] if is_heldout(t.id)]
        assert sum(i.startswith(name + "-") for i in ids["heldout"]) == min(per_dataset, len(held))
    assert len(pools["rl"]) <= preset.rl_pool
    assert pools == data.task_pools(by_source, preset, seed)  # the same run resumes the same pools


def _adapter(folder: Path, A: np.ndarray, B: np.ndarray, alpha: int = 32, r: int = 2) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"lora_alpha": alpha, "r": r}))
    save_file(
        {"m.q_proj.lora_A.weight": A, "m.q_proj.lora_B.weight": B},
        str(folder / "adapter_model.safetensors"),
    )
    return folder


def test_adapter_drift_is_rl_move_relative_to_sft_move(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(2, 6)).astype(np.float32)
    B = rng.normal(size=(5, 2)).astype(np.float32)
    sft = _adapter(tmp_path / "sft", A, B)
    assert analysis.adapter_drift(sft, _adapter(tmp_path / "same", A, B)) == 0.0
    # B scaled by 1.1: the update scale·BA grows by 10% of itself, whatever the LoRA scale.
    drift = analysis.adapter_drift(sft, _adapter(tmp_path / "rl", A, 1.1 * B))
    assert drift == pytest.approx(0.1, rel=1e-5)


def _row(r5: list[float]) -> dict:
    return {f"{m}_by_question": list(r5) for m in stages.METRICS}


def test_paired_gain_of_rl_over_sft_is_per_question_and_its_interval_excludes_no_change():
    before = [0.0, 0.5, 1.0, 0.5] * 10
    rows = {
        "sft": _row(before),
        "rl (step 2)": _row([v + 0.25 for v in before]),  # every question gains a quarter
        "same": _row(before),
    }
    gains = report.paired_gains(rows, [("rl (step 2)", "sft"), ("same", "sft"), ("absent", "sft")])
    assert set(gains) == {"rl (step 2) - sft", "same - sft"}
    up = gains["rl (step 2) - sft"]["recall_at_5"]
    assert up["delta"] == pytest.approx(0.25)
    assert up["ci"] == pytest.approx([0.25, 0.25])  # no spread in the differences: no doubt
    flat = gains["same - sft"]["reward"]
    assert flat["delta"] == 0.0 and flat["ci"][0] <= 0.0 <= flat["ci"][1]
    assert "R@5 +0.250 [+0.250, +0.250]" in report.gain_lines(gains)[0]


@pytest.fixture(scope="module")
def tiny_adapters(tmp_path_factory: pytest.TempPathFactory):
    """A tiny model and LoRA adapters saved to disk: ``sft``, an identical copy, and two moves
    of it (``moved`` and ``moved2``, twice as far)."""
    import torch

    from sleuth.train.model import StudentConfig, load_student
    from sleuth.train.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("kl")
    folder = build_tiny_model(root / "tiny", layers=2, hidden=64)
    model, _ = load_student(StudentConfig(path=str(folder), lora_r=4, lora_alpha=8))
    torch.manual_seed(0)
    B = {n: p for n, p in model.named_parameters() if "lora_B" in n}
    with torch.no_grad():
        for p in B.values():
            p.normal_(0.0, 0.3)
    sft = {n: p.clone() for n, p in B.items()}
    noise = {n: torch.randn_like(p) * 0.3 for n, p in B.items()}
    paths = {}
    for name, scale in (("sft", 0.0), ("same", 0.0), ("moved", 1.0), ("moved2", 2.0)):
        with torch.no_grad():
            for n, p in B.items():
                p.copy_(sft[n] + scale * noise[n])
        model.save_pretrained(root / name)
        paths[name] = root / name
    return folder, paths


def _sequences(vocab: int) -> list:
    from sleuth.train.sequences import TrainSequence

    rng = np.random.default_rng(1)
    out = []
    for n, written in ((24, range(6, 14)), (30, range(20, 30))):
        ids = tuple(int(i) for i in rng.integers(5, vocab, size=n))
        mask = tuple(int(t in written) for t in range(n))
        out.append(TrainSequence(ids, mask, tuple(0.0 for _ in ids), (0,)))
    return out


def test_kl_between_adapters_is_exact_at_written_positions_and_grows_with_the_move(tiny_adapters):
    import torch
    from peft import PeftModel

    from sleuth.train.model import StudentConfig, load_student

    folder, paths = tiny_adapters
    model = analysis.with_adapters(folder, paths)
    seqs = _sequences(model.config.vocab_size)
    assert analysis.policy_kl(model, seqs, "same", "sft") == pytest.approx(0.0, abs=1e-9)
    moved = analysis.policy_kl(model, seqs, "moved", "sft")
    assert 0.0 < moved < analysis.policy_kl(model, seqs, "moved2", "sft")

    # the same number from two separate models, at the positions that predict written tokens
    def logp(name):
        base, _ = load_student(StudentConfig(path=str(folder), lora=False))
        m = PeftModel.from_pretrained(base, str(paths[name])).eval()
        with torch.no_grad():
            return [
                torch.log_softmax(m(input_ids=torch.tensor([s.input_ids])).logits[0].double(), -1)
                for s in seqs
            ]

    p, q = logp("moved"), logp("sft")
    kls = [
        float((p[i][t - 1].exp() * (p[i][t - 1] - q[i][t - 1])).sum())
        for i, s in enumerate(seqs)
        for t, m in enumerate(s.loss_mask)
        if m
    ]
    assert moved == pytest.approx(float(np.mean(kls)), rel=1e-9)
    assert np.isnan(analysis.policy_kl(model, [], "moved", "sft"))


def test_rollout_speed_times_both_rl_engines_on_the_same_prompts_and_is_cached(
    tiny_adapters, tmp_path
):
    pytest.importorskip("ctranslate2")
    folder, paths = tiny_adapters
    preset = RECIPES["smoke"]
    harness = replace(preset, max_reply_tokens=8).harness()
    speed = analysis.rollout_speed(folder, paths["sft"], _tasks("q", 2), harness, preset, tmp_path)
    engine = f"ct2-{preset.rollout_compute_type}"
    assert set(speed) == {"transformers", engine, "speedup"}
    assert speed["transformers"] > 0 and speed[engine] > 0
    assert speed["speedup"] == pytest.approx(speed[engine] / speed["transformers"])
    assert json.loads((tmp_path / "rollout_speed.json").read_text()) == speed
    (tmp_path / "rollout_speed.json").write_text(json.dumps({**speed, "speedup": -1.0}))
    assert (
        analysis.rollout_speed(folder, paths["sft"], [], harness, preset, tmp_path)["speedup"]
        == -1.0
    )


@pytest.mark.parametrize("credit", [True, False])
def test_rl_reward_setting_of_the_preset_reaches_the_trainer(tmp_path, monkeypatch, credit):
    seen = []
    monkeypatch.setattr(
        stages, "run_rl", lambda config, tasks, tools, **k: seen.append(config) or []
    )
    preset = replace(RECIPES["cpu-small"], credit_malformed_list=credit)
    stages.train_rl(Path("m.gguf"), tmp_path / "sft", [], None, preset, tmp_path)
    assert [c.reward.credit_malformed_list for c in seen] == [credit]


def test_cpu_small_reaches_the_trainers_with_the_learning_curve_preset_values(tmp_path):
    """The recipe moved into the library unchanged: what SFT, RL and the harness get."""
    from sleuth.harness.budget import BudgetConfig
    from sleuth.policies.manifest import HarnessSettings, read_manifest
    from sleuth.policies.spec import shipped_adapter
    from sleuth.train.recipes.config import SMALL_PROMPT

    config = RECIPES["cpu-small"]
    h = config.harness()
    assert (h.budget.total, h.budget.per_call_tokens, h.budget.reply_reserve) == (2304, 640, 256)
    assert (h.budget.max_turns, h.max_reply_tokens, h.max_documents) == (3, 160, 5)
    assert h.system_prompt == SMALL_PROMPT.format(n=5)
    assert h.budget.soft_threshold == BudgetConfig(total=2304).soft_threshold
    rl = stages.rl_config(Path("m.gguf"), tmp_path / "sft", config, tmp_path)
    assert (rl.lr, rl.student.lora_r, rl.student.lora_alpha, rl.max_steps) == (2e-4, 16, 32, 15)
    assert (rl.queries_per_step, rl.rollouts_per_query, rl.substeps, rl.epochs) == (4, 8, 2, 2)
    assert (rl.micro_batch_size, rl.rollout_engine, rl.rollout_compute_type) == (1, "ct2", "int8")
    assert (rl.rollout_workers, rl.autocast_bf16, rl.keep_checkpoints) == (8, True, 16)
    assert rl.max_seq_len == 2304 and rl.student.adapter == str(tmp_path / "sft")
    assert (config.sft_lr, config.sft_epochs, config.sft_batch) == (5e-4, 1, 8)
    assert config.teacher() == {"max_queries": 2, "bridge_entities": 2, "max_hops": 1}
    assert (config.heldout_per_dataset, config.sft_per_source, config.rl_pool) == (22, 80, 160)
    shipped = read_manifest(shipped_adapter()) if shipped_adapter() else None
    if shipped is not None:  # the shipped adapter trained under cpu-small's harness and tools
        assert HarnessSettings.of(h) == shipped.harness
        assert shipped.tools.search_max_chunks == config.chunks_per_search


def test_the_benchmark_script_runs_cpu_small_as_the_committed_curve_was_run():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "learning_curve.py"
    spec = importlib.util.spec_from_file_location("learning_curve", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = json.loads((path.parent / "results" / "learning_curve.json").read_text())
    args = script.parse_args(shlex.split(committed["command"])[2:])  # python learning_curve.py
    assert script.recipe(args) == replace(RECIPES["cpu-small"], eval_steps=())
    assert args.no_selector and args.device == "cpu"
    assert script.recipe(script.parse_args(["--smoke"])) == RECIPES["smoke"]


def test_recipe_manifests_name_what_each_phase_trained_on_and_resumed_sft_keeps_one(tmp_path):
    from sleuth.policies.manifest import read_manifest

    pools = {"heldout": _tasks("h", 2), "sft": _tasks("s", 3), "rl": _tasks("r", 2)}
    config = RECIPES["cpu-small"]
    sft = stages.recipe_manifest(config, Path("m.gguf"), pools, "sft", "cmd")
    rl = stages.recipe_manifest(config, Path("m.gguf"), pools, "rl", "cmd")
    assert sft.trained_task_ids == sorted(t.id for t in pools["sft"])
    assert rl.trained_task_ids == sorted(t.id for t in pools["sft"] + pools["rl"])
    assert sft.held_out_task_ids == ["h-0", "h-1"] and sft.final_list == "selector"
    assert sft.tools.ranker and sft.preset["lora_r"] == 16 and sft.trained_with == "cmd"
    (tmp_path / "sft" / "model").mkdir(parents=True)  # a finished SFT: the report exists
    (tmp_path / "sft" / "sft_report.json").write_text(json.dumps({"steps": 3}))
    adapter, done = stages.train_sft(Path("m.gguf"), [], None, config, tmp_path, sft)
    assert done == {"steps": 3} and read_manifest(adapter) == sft


def test_train_recipe_refuses_an_unknown_recipe_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from sleuth.cli import app

    argv = ["train", "recipe", "gpu-huge", "--index", "i", "--out", str(tmp_path), "--data", "d"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and "unknown recipe 'gpu-huge'" in result.output
