"""A fast CPU rollout engine: the trainer's model sampled by CTranslate2.

Why: the transformers policy runs a Python loop per token (about 10 tokens/s for SmolLM2-135M on
two cores); CTranslate2 runs the whole decode loop in C++ over weights it may quantise on load,
from a prebuilt PyPI wheel.

* **Weights.** :meth:`CT2RolloutEngine.sync` merges base + LoRA out of place (the trainer's
  weights are never written) into a weightless shell of the model, converts it with
  CTranslate2's own loader for the architecture, and loads a new generator. ``sleuth train rl``
  calls it before each step's rollouts, i.e. after the previous step's optimiser steps, and logs
  its cost as ``time/sync_s``.
* **Prompts.** Every call re-reads its whole prompt (CTranslate2 keeps no cache across calls),
  except the first message: the system message that all rollouts share is forwarded once per
  generator (:meth:`CT2RolloutEngine.static_prefix_len`).
* **Log-probs.** Each sampled token records ``log softmax(logits / T)[token]``: its log-prob under
  the tempered distribution it was drawn from (before any top-p truncation), which is what
  :func:`~sleuth.train.sequences.sequence_logprobs` computes at the same temperature. At T = 1 it
  is CTranslate2's own log-prob; otherwise it is computed from the returned logits.
* **Mismatch.** ``float32`` gives the trainer's numbers up to float error; ``int8_float32`` is
  faster and differs more. The trainer logs the gap on every step
  (``train/sampler_mismatch``, mean |log π_train − log π_sample| on sampled tokens).
* **Batching.** Rollouts run in threads (``rollout_workers``); their decode calls are coalesced:
  one thread at a time drives the generator over every prompt waiting at that moment (one
  ``generate_batch``, one decode loop for all), so a 135M model's per-token overhead is paid
  once per batch instead of once per rollout. Each reply is cut at its own length limit. A batch
  reads at most ``max_batch_tokens`` prompt tokens: CTranslate2 copies its growing KV cache every
  decode step, so long prompts decoded together run slower than one after another (measured on
  2 cores: eight 1.1k-token prompts, 32 new tokens each, 40 s batched vs 21 s in turn).
* **Seeds.** CTranslate2 keeps one RNG per worker thread, seeded once, so a rollout's samples are
  not a function of its seed: a resumed run redoes a lost step with fresh samples.
"""

from __future__ import annotations

import copy
import gc
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import torch

from sleuth.errors import ConfigError
from sleuth.memory import trim_heap
from sleuth.policies.chatml import stop_ids
from sleuth.policies.local_hf import LocalHFPolicy
from sleuth.policies.sampling import Sampling

CT2_INSTALL = 'pip install "sleuth[train]"  # ctranslate2'
COMPUTE_TYPES = ("float32", "int8_float32", "int8")


def _require_ct2() -> Any:
    try:
        import ctranslate2
    except ImportError as exc:
        raise ImportError(
            f"the CTranslate2 rollout engine needs ctranslate2: {CT2_INSTALL}"
        ) from exc
    return ctranslate2


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """``model``'s current weights under a plain model's names, LoRA deltas added out of place
    (W + scale · B A in one ``addmm``). Untouched tensors are shared, not copied, and the
    trainer's weights are never written.
    """
    from peft.tuners.lora import Linear as LoraLinear

    if not hasattr(model, "peft_config"):
        return dict(model.state_dict())
    base = model.get_base_model()
    state: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLinear):
                state[f"{name}.weight"] = _merged_linear(module)
        for key, value in base.state_dict().items():
            if "lora_" not in key:
                state.setdefault(key.replace(".base_layer.", "."), value)
    return state


def _merged_linear(module: Any) -> torch.Tensor:
    weight: torch.Tensor = module.get_base_layer().weight
    for adapter in module.active_adapters:
        if adapter not in module.lora_A:
            continue
        if module.use_dora.get(adapter, False) or module.fan_in_fan_out:
            raise ValueError(
                "the CTranslate2 engine merges plain LoRA only (no DoRA, fan-in-fan-out)"
            )
        A, B = module.lora_A[adapter].weight, module.lora_B[adapter].weight
        weight = torch.addmm(weight, B, A, alpha=module.scaling[adapter])
    return weight


def merged_shell(model: Any) -> Any:
    """A plain transformers model over :func:`merged_state_dict`, built without initialising or
    copying weights; CTranslate2's loader dismantles the model it reads, so it gets this."""
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if hasattr(model, "peft_config") else model
    config = copy.deepcopy(base.config)
    # A model read from GGUF is dequantised on load but keeps the GGUF marker, which would send
    # the converter looking for quantised tensors.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        shell = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    shell.load_state_dict(merged_state_dict(model), assign=True, strict=False)
    shell.tie_weights()
    missing = [n for n, p in shell.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"no weights for {missing[:3]} in the model to convert")
    return shell.eval()


def convert(model: Any, tokenizer: Any, folder: str | Path) -> Path:
    """Write ``model`` (base + LoRA) as a CTranslate2 model folder, weights in float32.

    The library's loader calls ``gc.collect()`` once per layer, which costs seconds in a process
    holding a large heap; it is a no-op here (the copy is freed by reference counting). Weights
    are stored unquantised (the generator quantises on load) and without the pairwise search for
    tied weights, which is quadratic in the number of layers.
    """
    from ctranslate2.converters.transformers import _MODEL_LOADERS

    shell = merged_shell(model)
    name = type(shell.config).__name__
    if name not in _MODEL_LOADERS:
        raise ValueError(f"CTranslate2 cannot convert a {name} model")
    with mock.patch.object(gc, "collect", lambda *args: 0):
        spec = _MODEL_LOADERS[name](shell, tokenizer)
    spec.validate()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))
    return out


def load_generator(
    model: Any, tokenizer: Any, compute_type: str = "float32", threads: int = 0
) -> Any:
    """A CTranslate2 generator over ``model``'s current weights (converted via a temp folder)."""
    ct2 = _require_ct2()
    with tempfile.TemporaryDirectory(prefix="sleuth-ct2-") as folder:
        convert(model, tokenizer, folder)
        return ct2.Generator(folder, device="cpu", compute_type=compute_type, intra_threads=threads)


def tempered_logprob(logits: Any, token: int, temperature: float) -> float:
    """``log softmax(logits / temperature)[token]`` in float64 (logits: one vocabulary row)."""
    z = np.asarray(logits, dtype=np.float64).reshape(-1) / temperature
    peak = z.max()
    return float(z[token] - peak - np.log(np.exp(z - peak).sum()))


class CT2Policy(LocalHFPolicy):
    """``LocalHFPolicy``'s rendering and reply parsing over a CTranslate2 decode loop.

    ``logprobs`` are of the tempered distribution (see the module docstring), not at T = 1.
    """

    def __init__(self, engine: CT2RolloutEngine, seed: int | None = None, name: str = "ct2"):
        super().__init__(engine.model, engine.tokenizer, engine.sampling, seed=seed, name=name)
        self.engine = engine

    def _sample_loop(self, prompt_ids: list[int], limit: int) -> tuple[list[int], list[float]]:
        return self.engine.sample(prompt_ids, limit)


@dataclass(eq=False)  # requests are told apart by identity
class _Request:
    """One decode call waiting for (or served by) a batch."""

    tokens: list[str]
    static: tuple[str, ...]
    limit: int
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    error: BaseException | None = None
    done: bool = False


class CT2RolloutEngine:
    """Rollouts sampled by CTranslate2 on CPU; :meth:`sync` pushes the trainer's weights to it.

    Args:
        model / tokenizer: the model being trained (LoRA-wrapped or not) and its tokenizer.
        sampling: recorded log-probs are at its temperature; 0 decodes greedily (inference,
            e.g. ``--policy local``) and records log-probs at 1 (default: :class:`Sampling`).
        compute_type: ``float32`` (closest to the trainer), ``int8_float32`` or ``int8``.
        threads: CPU threads of the generator (0: CTranslate2's default).
        max_batch: most concurrent decode calls served by one ``generate_batch``.
        max_batch_tokens: most prompt tokens (after the cached system message) one
            ``generate_batch`` reads; a longer single prompt still runs, alone.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: Sampling | None = None,
        compute_type: str = "float32",
        threads: int = 0,
        max_batch: int = 16,
        max_batch_tokens: int = 2048,
    ):
        if max_batch < 1 or max_batch_tokens < 1:
            raise ConfigError(
                f"max_batch ({max_batch}) and max_batch_tokens ({max_batch_tokens}) must be >= 1"
            )
        if compute_type not in COMPUTE_TYPES:
            raise ConfigError(f"compute_type {compute_type!r} unknown; use one of {COMPUTE_TYPES}")
        _require_ct2()
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()
        self.compute_type = compute_type
        self.threads = threads
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.generator: Any = None
        self.stop_ids = sorted(stop_ids(tokenizer, model))
        self.batch_sizes: list[int] = []  # of every generate_batch call, for throughput stats
        self._waiting: list[_Request] = []
        self._turn = threading.Condition()
        self._driving = False

    def policy(self, seed: int, name: str = "ct2-rl") -> CT2Policy:
        return CT2Policy(self, seed=seed, name=name)

    def sync(self, model: Any, step: int) -> None:
        """Convert ``model``'s current weights (base + LoRA) and sample from them from now on."""
        self.model = model
        self.generator = None  # the old weights go before the new ones load
        self.generator = load_generator(model, self.tokenizer, self.compute_type, self.threads)
        trim_heap()  # the conversion's buffers, freed, would otherwise stay with the process

    def sample(self, prompt_ids: list[int], limit: int) -> tuple[list[int], list[float]]:
        """Sampled ids (the stop token included when reached) and their tempered log-probs.

        Thread-safe: concurrent calls are decoded together (see *Batching* above).
        """
        if self.generator is None:
            raise RuntimeError("CT2RolloutEngine has no weights yet: call sync(model, step) first")
        tokens = self.tokenizer.convert_ids_to_tokens(prompt_ids)
        cut = self.static_prefix_len(prompt_ids)
        request = _Request(tokens[cut:], tuple(tokens[:cut]), limit)
        with self._turn:
            self._waiting.append(request)
            while not request.done:
                if self._driving:
                    self._turn.wait()
                    continue
                self._driving = True  # this thread serves the waiting calls, its own included
                batch = self._take()
                self._turn.release()
                try:
                    self._decode(batch)
                finally:
                    self._turn.acquire()
                    self._driving = False
                    self._turn.notify_all()
        if request.error is not None:
            raise request.error
        return request.ids, request.logprobs

    def _take(self) -> list[_Request]:
        """Waiting calls that share the first one's cached prefix, in arrival order, up to
        ``max_batch`` of them and ``max_batch_tokens`` prompt tokens (the first always)."""
        static = self._waiting[0].static
        batch: list[_Request] = []
        tokens = 0
        for r in self._waiting:
            if r.static != static:
                continue
            full = len(batch) == self.max_batch or tokens + len(r.tokens) > self.max_batch_tokens
            if batch and full:
                break
            batch.append(r)
            tokens += len(r.tokens)
        self._waiting = [r for r in self._waiting if r not in batch]
        return batch

    def _decode(self, batch: list[_Request]) -> None:
        """One ``generate_batch`` over ``batch``; every request ends done, with ids or an error."""
        T = self.sampling.temperature
        greedy = T == 0
        exact = greedy or T == 1.0  # CTranslate2's own log-probs are at T = 1

        def record(step: Any) -> bool:
            r = batch[step.batch_id]
            if len(r.ids) < r.limit:
                logprob = (
                    step.log_prob if exact else tempered_logprob(step.logits, step.token_id, T)
                )
                r.ids.append(int(step.token_id))
                r.logprobs.append(float(logprob))
            return False  # keep going

        try:
            self.generator.generate_batch(
                [r.tokens for r in batch],
                static_prompt=list(batch[0].static) or None,
                max_length=max(r.limit for r in batch),
                sampling_topk=1 if greedy else 0,  # 0: the whole vocabulary
                sampling_topp=self.sampling.top_p,
                sampling_temperature=T or 1.0,
                end_token=self.stop_ids,
                include_prompt_in_result=False,  # the prompt is one forward pass, not a decode loop
                return_scores=exact,
                return_logits_vocab=not exact,
                callback=record,
            )
            self.batch_sizes.append(len(batch))
        except BaseException as exc:  # every waiting rollout learns of it, not only this thread
            for r in batch:
                r.error = exc
        finally:
            for r in batch:
                r.done = True

    def static_prefix_len(self, prompt_ids: list[int]) -> int:
        """Length of the prompt's first message (through its end-of-turn token), 0 if none.

        Every rollout and turn of a run opens with the same system message (the instructions
        and tool schemas, ~1,000 tokens for SmolLM2), so CTranslate2 computes its KV state once
        per generator (``static_prompt``) and each call forwards only the rest.
        """
        ends = (i + 1 for i, t in enumerate(prompt_ids[:-1]) if t in self.stop_ids)
        return next(ends, 0)
