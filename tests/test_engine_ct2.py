"""The CTranslate2 rollout engine on a tiny random model (no download): its log-probs are the
trainer's, a weight sync after an optimiser step reaches it, and RL runs through it and resumes.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ctranslate2")

from sleuth.errors import ConfigError, InputError
from sleuth.policies.ct2 import (
    CT2Policy,
    CT2RolloutEngine,
    _Request,
    merged_state_dict,
    tempered_logprob,
)
from sleuth.policies.sampling import Sampling
from sleuth.policies.spec import PolicyOptions, build_policy
from sleuth.train.model import StudentConfig, build_optimizer, load_student
from sleuth.train.rl import run_rl
from sleuth.train.rl_types import RLConfig, TrainItem
from sleuth.train.rl_update import cispo_update
from sleuth.train.runlog import read_log
from sleuth.train.sequences import TrainSequence, sequence_logprobs
from sleuth.train.tiny import build_tiny_model
from tests.test_train_rl import HARNESS, _crash_at, world  # noqa: F401  (world is a fixture)

LOGPROB_TOL = 1e-4
"""float32 CTranslate2 vs float32 torch on the same tokens: summation order only."""
PROMPT = [1, 5, 9, 17, 2, 33, 65, 129, 200, 300]  # id 2 (<|im_end|>) ends a cached first turn


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory):
    """A tiny model wrapped in LoRA whose adapter is not zero (so a wrong merge shows)."""
    folder = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64)
    model, tokenizer = load_student(StudentConfig(path=str(folder), lora_r=4, lora_alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    return model, tokenizer


def _trainer_logprobs(model, prompt: list[int], sampled: list[int], temperature: float):
    ids = torch.tensor([prompt + sampled])
    with torch.no_grad():
        logprobs, _ = sequence_logprobs(model.eval(), ids, temperature=temperature)
    return logprobs[0, len(prompt) :].tolist()


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_engine_logprobs_are_the_trainers_at_the_sampling_temperature(student, temperature):
    model, tokenizer = student
    engine = CT2RolloutEngine(model, tokenizer, Sampling(temperature))
    engine.sync(model, step=0)
    assert engine.static_prefix_len(PROMPT) == 5
    ids, logprobs = engine.sample(PROMPT, 24)
    assert 0 < len(ids) == len(logprobs) <= 24
    trainer = _trainer_logprobs(model, PROMPT, ids, temperature)
    np.testing.assert_allclose(logprobs, trainer, atol=LOGPROB_TOL)
    if temperature != 1.0:  # tempered, not the raw distribution's log-probs
        raw = _trainer_logprobs(model, PROMPT, ids, 1.0)
        assert max(abs(a - b) for a, b in zip(logprobs, raw, strict=True)) > 100 * LOGPROB_TOL


def test_a_policy_records_what_the_trainer_needs(student) -> None:
    model, tokenizer = student
    engine = CT2RolloutEngine(model, tokenizer, Sampling(max_new_tokens=12))
    with pytest.raises(RuntimeError, match="sync"):
        engine.policy(0).generate([{"role": "user", "content": "hi"}], [], 50)
    engine.sync(model, step=0)
    out = engine.policy(3).generate([{"role": "user", "content": "find the bridge"}], [], 50)
    assert out.prompt_token_ids == engine.policy(3).render(
        [{"role": "user", "content": "find the bridge"}], []
    )
    assert 0 < len(out.token_ids) == len(out.logprobs) <= 12  # max_new_tokens caps the reply
    assert 0 < engine.static_prefix_len(out.prompt_token_ids) < len(out.prompt_token_ids)
    trainer = _trainer_logprobs(model, out.prompt_token_ids, out.token_ids, 1.0)
    np.testing.assert_allclose(out.logprobs, trainer, atol=LOGPROB_TOL)
    assert out.finish_reason == ("stop" if out.token_ids[-1] in engine.stop_ids else "length")


def test_weight_sync_after_an_optimizer_step_changes_the_engine(student) -> None:
    model, tokenizer = copy.deepcopy(student)
    model.train()
    engine = CT2RolloutEngine(model, tokenizer)
    engine.sync(model, step=0)
    ids, before = engine.sample(PROMPT, 16)
    optimizer = build_optimizer(model, lr=0.05)
    target = torch.tensor([PROMPT + ids])
    logprobs, _ = sequence_logprobs(model, target)
    (-logprobs[0, len(PROMPT) :].sum()).backward()  # make the sampled reply likelier
    optimizer.step()
    new = _trainer_logprobs(model, PROMPT, ids, 1.0)
    assert max(abs(a - b) for a, b in zip(new, before, strict=True)) > 0.01  # the step moved it
    stale = _engine_scores(engine, ids)
    np.testing.assert_allclose(stale, before, atol=LOGPROB_TOL)  # not synced yet: old weights
    engine.sync(model, step=1)
    np.testing.assert_allclose(_engine_scores(engine, ids), new, atol=LOGPROB_TOL)


def _engine_scores(engine: CT2RolloutEngine, ids: list[int]) -> list[float]:
    """The engine's log-probs of a fixed reply (CTranslate2 scores it at temperature 1)."""
    tokens = engine.tokenizer.convert_ids_to_tokens(PROMPT + ids)
    scored = engine.generator.score_batch([tokens])[0].log_probs
    return [float(x) for x in scored[len(PROMPT) - 1 :]]


def test_merge_matches_peft_and_leaves_the_trainer_untouched(student) -> None:
    model, _ = student
    before = {k: v.clone() for k, v in model.state_dict().items()}
    merged = merged_state_dict(model)
    reference = copy.deepcopy(model).merge_and_unload().state_dict()
    assert merged.keys() == reference.keys()
    for key, value in reference.items():
        torch.testing.assert_close(merged[key], value, rtol=0, atol=1e-6)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key])


@settings(max_examples=50, deadline=None)
@given(
    logits=st.lists(st.floats(-30, 30), min_size=2, max_size=40),
    temperature=st.floats(0.05, 4.0),
)
def test_tempered_logprobs_are_a_normalised_log_softmax(logits, temperature) -> None:
    values = [tempered_logprob(logits, i, temperature) for i in range(len(logits))]
    assert np.exp(values).sum() == pytest.approx(1.0, abs=1e-9)
    expected = torch.log_softmax(torch.tensor(logits, dtype=torch.float64) / temperature, -1)
    np.testing.assert_allclose(values, expected.numpy(), atol=1e-9)


def test_engine_refuses_settings_that_cannot_work(student) -> None:
    model, tokenizer = student
    with pytest.raises(ConfigError, match="temperature"):
        CT2RolloutEngine(model, tokenizer, Sampling(temperature=-1.0))
    with pytest.raises(ConfigError, match="compute_type"):
        CT2RolloutEngine(model, tokenizer, compute_type="int3")
    with pytest.raises(ConfigError, match=r"max_batch_tokens \(0\) must be >= 1"):
        CT2RolloutEngine(model, tokenizer, max_batch_tokens=0)
    with pytest.raises(ConfigError, match="rollout engine 'vllm'"):
        RLConfig(rollout_engine="vllm")  # type: ignore[arg-type]


def test_two_rl_steps_through_the_engine_crash_and_resume(world, tmp_path: Path) -> None:  # noqa: F811
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
        lr=3e-2,  # large, so an engine left on stale weights would show in the mismatch
        zero_variance_tol=-1.0,  # a random model's groups are constant; keep them
        harness=HARNESS,
        rollout_workers=2,
        rollout_engine="ct2",
    )
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_rl(config, tasks, tools, on_step=_crash_at(1))
    crashed = read_log(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in crashed] == [0, 1]
    for record in crashed:
        assert record["throughput/sampled_tokens"] > 0 and record["time/sync_s"] > 0
        assert record["train/optimizer_steps"] == 2
        assert 0 <= record["train/sampler_mismatch"] < 1e-3  # float32 engine: float error only
    assert crashed[0]["train/ratio_mean_substep0"] == pytest.approx(1.0, abs=1e-3)
    assert (tmp_path / "checkpoints" / "LATEST").read_text().strip() == "step_000001"

    log = run_rl(config, tasks, tools)  # resumes from the step-1 checkpoint

    assert [r["step"] for r in log] == [0, 1]
    assert log[0] == crashed[0]  # the checkpointed step is kept, not redone
    assert log[1]["train/sampler_mismatch"] < 1e-3  # resumed weights reached the engine
    assert (tmp_path / "checkpoints" / "LATEST").read_text().strip() == "step_000002"
    assert [r["step"] for r in run_rl(config, tasks, tools)] == [0, 1]  # finished: no new step


def test_temperature_zero_decodes_greedily_with_logprobs_at_one(student) -> None:
    model, tokenizer = student
    engine = CT2RolloutEngine(model, tokenizer, Sampling(temperature=0.0))
    engine.sync(model, step=0)
    ids, logprobs = engine.sample(PROMPT, 12)
    with torch.no_grad():
        logits = model.eval()(torch.tensor([PROMPT + ids])).logits[0, len(PROMPT) - 1 : -1]
    assert ids == logits.argmax(-1).tolist()
    np.testing.assert_allclose(
        logprobs, _trainer_logprobs(model, PROMPT, ids, 1.0), atol=LOGPROB_TOL
    )


def test_a_local_policy_through_ct2_decodes_like_transformers(world) -> None:  # noqa: F811
    _, _, model = world
    messages = [{"role": "user", "content": "Which bridge crosses the river?"}]
    fast = build_policy(f"local:{model}", PolicyOptions(engine="ct2")).factory(0)
    slow = build_policy(f"local:{model}", PolicyOptions(engine="transformers")).factory(0)
    assert isinstance(fast, CT2Policy) and not isinstance(slow, CT2Policy)
    a, b = fast.generate(messages, [], 16), slow.generate(messages, [], 16)
    assert a.token_ids == b.token_ids and a.text == b.text  # greedy: the same reply
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=LOGPROB_TOL)
    with pytest.raises(InputError, match="engine"):
        PolicyOptions(engine="llama")


def test_cli_runs_a_local_model_through_ct2_and_refuses_unknown_engines(world, tmp_path) -> None:  # noqa: F811
    _, _, model = world
    args = ["run", "bridge over the river", "--index", str(Path(model).parent / "index")]
    args += ["--policy", f"local:{model}", "--max-turns", "2", "--max-reply-tokens", "16"]
    args += ["--budget", "3072", "--json"]
    ok = _sleuth(*args, "--trajectory", str(tmp_path / "ok.jsonl"), "--engine", "ct2")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["turns"] >= 1 and (tmp_path / "ok.jsonl").exists()
    bad = _sleuth(*args, "--trajectory", str(tmp_path / "bad.jsonl"), "--engine", "llama")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: unknown engine 'llama'")
    assert not (tmp_path / "bad.jsonl").exists()  # refused before anything ran


def _sleuth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sleuth.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("anchor", ["sampler", "recompute"])
def test_an_update_reports_the_sampler_trainer_gap(student, anchor: str) -> None:
    model, _ = copy.deepcopy(student)
    reply = [40, 41, 42, 43]
    exact = _trainer_logprobs(model, PROMPT, reply, 1.0)
    offset = [0.0] * len(PROMPT) + [lp + 0.5 for lp in exact]  # a sampler 0.5 nats off
    mask = (0,) * len(PROMPT) + (1,) * len(reply)
    seq = TrainSequence(tuple(PROMPT + reply), mask, tuple(offset), (0,))
    items = [TrainItem(seq, 1.0, 0), TrainItem(seq, -1.0, 0)]
    config = RLConfig(substeps=1, micro_batch_size=2, anchor=anchor)  # type: ignore[arg-type]
    stats = cispo_update(model, build_optimizer(model, 1e-3), items, config, pad=0, seed=0)
    assert stats["sampler_mismatch"] == pytest.approx(0.5, abs=1e-4)


def test_a_bf16_autocast_update_shows_its_rounding_as_sampler_mismatch(student) -> None:
    """Exact float32 sampler log-probs against a bfloat16 trainer: the gap is the autocast's
    rounding (so autocast really ran), small enough for the CISPO ratio to absorb."""
    model, _ = copy.deepcopy(student)
    reply = [40, 41, 42, 43]
    exact = _trainer_logprobs(model, PROMPT, reply, 1.0)
    mask = (0,) * len(PROMPT) + (1,) * len(reply)
    seq = TrainSequence(tuple(PROMPT + reply), mask, tuple([0.0] * len(PROMPT) + exact), (0,))
    items = [TrainItem(seq, 1.0, 0), TrainItem(seq, -1.0, 0)]
    stats = {}
    for bf16 in (False, True):
        config = RLConfig(substeps=1, micro_batch_size=2, autocast_bf16=bf16)
        trained = copy.deepcopy(model)
        optimizer = build_optimizer(trained, 1e-3)
        stats[bf16] = cispo_update(trained, optimizer, items, config, pad=0, seed=0)
    assert stats[False]["sampler_mismatch"] < LOGPROB_TOL
    assert 10 * LOGPROB_TOL < stats[True]["sampler_mismatch"] < 0.1


def test_concurrent_calls_are_decoded_in_one_batch_each_as_if_alone(student) -> None:
    """Rollout threads share decode batches; each reply is the one a lone call gets (greedy),
    cut at its own limit, and an error reaches every caller of the batch."""
    model, tokenizer = student
    engine = CT2RolloutEngine(model, tokenizer, Sampling(0.0), max_batch=8)
    engine.sync(model, step=0)
    prompts = [PROMPT, PROMPT[:7] + [40, 41], PROMPT + [7, 8, 9], PROMPT]  # a duplicate, too
    limits = [12, 5, 9, 3]
    alone = [engine.sample(p, n) for p, n in zip(prompts, limits, strict=True)]
    engine.batch_sizes.clear()
    barrier = threading.Barrier(len(prompts))

    def call(i: int):
        barrier.wait()
        return engine.sample(prompts[i], limits[i])

    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(call, range(len(prompts))))
    assert [ids for ids, _ in together] == [ids for ids, _ in alone]
    for (_, a), (_, b) in zip(together, alone, strict=True):
        np.testing.assert_allclose(a, b, atol=LOGPROB_TOL)
    assert all(len(ids) <= n for (ids, _), n in zip(together, limits, strict=True))
    assert max(engine.batch_sizes) > 1
    assert sum(engine.batch_sizes) == len(prompts)

    engine.generator = _Broken()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(engine.sample, PROMPT, 4) for _ in range(2)]
        for future in futures:
            with pytest.raises(RuntimeError, match="decoder failed"):
                future.result(timeout=60)


class _Broken:
    def generate_batch(self, *args, **kwargs):
        raise RuntimeError("decoder failed")


@given(
    waiting=st.lists(st.tuples(st.integers(1, 30), st.sampled_from([(), ("s",)])), max_size=12),
    max_batch=st.integers(1, 5),
    max_batch_tokens=st.integers(1, 40),
)
def test_batches_keep_arrival_order_and_the_size_and_token_caps(
    waiting, max_batch, max_batch_tokens
) -> None:
    """Every waiting call is served exactly once; a batch shares one cached prefix, holds at most
    ``max_batch`` calls and ``max_batch_tokens`` prompt tokens unless it is one call alone, and
    takes the oldest call of its prefix first."""
    requests = [_Request(["t"] * n, static, 4) for n, static in waiting]
    engine = SimpleNamespace(
        _waiting=list(requests), max_batch=max_batch, max_batch_tokens=max_batch_tokens
    )
    served = []
    while engine._waiting:
        oldest = engine._waiting[0]
        batch = CT2RolloutEngine._take(engine)
        assert batch[0] is oldest
        assert len({r.static for r in batch}) == 1 and len(batch) <= max_batch
        assert len(batch) == 1 or sum(len(r.tokens) for r in batch) <= max_batch_tokens
        served += batch
    assert sorted(map(id, served)) == sorted(map(id, requests))


def test_long_prompts_are_not_batched_together() -> None:
    """Three 4-token prompts under a 10-token cap: two go together, the third waits."""
    requests = [_Request(["t"] * 4, (), 4) for _ in range(3)]
    engine = SimpleNamespace(_waiting=list(requests), max_batch=8, max_batch_tokens=10)
    assert CT2RolloutEngine._take(engine) == requests[:2]
    assert CT2RolloutEngine._take(engine) == requests[2:]
