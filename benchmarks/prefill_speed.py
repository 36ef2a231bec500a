"""Prompt-reading (prefill) speed of the rollout engines, side by side in one run.

RL rollouts on CPU are prefill-bound (``rollout_speed.py``): each harness turn re-reads the whole
conversation after the cached system message. This measures what one turn's prompt costs each
engine, to say where a faster rollout engine has to come from:

* ``ct2-*``: :class:`~sleuth.policies.ct2.CT2RolloutEngine`'s generator as RL calls it (system
  message as CTranslate2's cached ``static_prompt``, the rest read each call), one new token.
* ``torch-fp32`` / ``torch-bf16``: the trainer's model (LoRA-wrapped SmolLM2-135M), one forward
  pass over the whole prompt, in float32 and under bfloat16 autocast (as the RL update runs).
* ``torch-bf16 +kv``: the same forward over turn 2's new tokens only, on top of turn 1's KV
  cache: what an engine that keeps each rollout's cache across turns would pay.

Each round runs every cell once, so load from elsewhere hits all alike; the median is reported.

Usage: ``python benchmarks/prefill_speed.py [--rounds 3] [--threads 2] [--json out.json]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import DynamicCache

from rollout_speed import prompts
from sleuth.policies.ct2 import COMPUTE_TYPES, CT2RolloutEngine
from sleuth.policies.local_hf import cache_kwarg, smollm2_gguf_path
from sleuth.train.model import StudentConfig, load_student
from sleuth.train.rollout import LocalRolloutEngine


def torch_reader(model: torch.nn.Module, bf16: bool) -> Callable[[list[int]], None]:
    def read(ids: list[int]) -> None:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            model(torch.tensor([ids]), use_cache=False, logits_to_keep=1)

    return read


def cached_reader(model: torch.nn.Module, prefix: list[int]) -> Callable[[list[int]], None]:
    """Reads ``ids[len(prefix):]`` on top of ``prefix``'s KV cache (bf16 autocast)."""
    key = cache_kwarg(model)
    past = DynamicCache()  # filled in place by the forward
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.tensor([prefix]), use_cache=True, logits_to_keep=1, **{key: past})

    def read(ids: list[int]) -> None:
        assert ids[: len(prefix)] == prefix, "turn 2 does not extend turn 1's tokens"
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            model(
                torch.tensor([ids[len(prefix) :]]),
                use_cache=True,
                logits_to_keep=1,
                **{key: copy.deepcopy(past)},
            )

    return read


def ct2_reader(engine: CT2RolloutEngine, tokenizer) -> Callable[[list[int]], None]:
    def read(ids: list[int]) -> None:
        tokens = tokenizer.convert_ids_to_tokens(ids)
        cut = engine.static_prefix_len(ids)
        engine.generator.generate_batch(
            [tokens[cut:]],
            static_prompt=tokens[:cut] or None,
            max_length=1,
            sampling_topk=1,
            include_prompt_in_result=False,
        )

    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model, tokenizer = load_student(StudentConfig(path=str(smollm2_gguf_path()), lora_r=16))
    model.eval()
    render = LocalRolloutEngine(model, tokenizer).policy(0).render
    cases = {name: render(*p) for name, p in prompts().items() if name != "decode"}
    readers: dict[str, Callable[[list[int]], None]] = {
        "torch-fp32": torch_reader(model, bf16=False),
        "torch-bf16": torch_reader(model, bf16=True),
    }
    for compute_type in COMPUTE_TYPES:
        engine = CT2RolloutEngine(model, tokenizer, compute_type=compute_type, threads=args.threads)
        engine.sync(model, step=0)
        readers[f"ct2-{compute_type}"] = ct2_reader(engine, tokenizer)
    kv_name = "torch-bf16 +kv"
    readers[kv_name] = cached_reader(model, cases["turn 1"])
    cells = [(c, r) for c in cases for r in readers if not (r == kv_name and c == "turn 1")]
    sizes = ", ".join(f"{c} {len(ids)}" for c, ids in cases.items())
    print(f"prompt tokens: {sizes}; system message (ct2 static prompt) kept aside by ct2")

    for _ in range(2):  # warm-up: first calls allocate
        for c, r in cells:
            readers[r](cases[c])
    times: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
    for _ in range(args.rounds):
        for c, r in cells:
            started = time.perf_counter()
            readers[r](cases[c])
            times[c, r].append(time.perf_counter() - started)
    print(
        f"\nmedian seconds to read the prompt ({args.rounds} rounds), and vs ct2-int8 (RL's engine)"
    )
    print(f"{'engine':<16}" + "".join(f"{c:>22}" for c in cases))
    medians = {cell: statistics.median(ts) for cell, ts in times.items()}
    for r in readers:
        row = []
        for c in cases:
            m = medians.get((c, r))
            row.append("–" if m is None else f"{m:.2f} s ({medians[c, 'ct2-int8'] / m:.2f}x)")
        print(f"{r:<16}" + "".join(f"{x:>22}" for x in row))
    if args.json is not None:
        result = {
            "settings": {"rounds": args.rounds, "threads": args.threads},
            "prompt_tokens": {c: len(ids) for c, ids in cases.items()},
            "median_s": {f"{c}|{r}": m for (c, r), m in medians.items()},
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
