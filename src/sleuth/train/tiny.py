"""A tiny, randomly initialised chat model built locally in seconds (no download).

Tests and CPU smoke runs of the RL loop need a real Hugging Face causal LM with a real tokenizer
and chat template, but nothing may be fetched. We train a byte-level BPE tokenizer on a few
texts, give it ChatML special tokens and ``<tool_call>`` tags, and pair it with a random Qwen2.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

CHAT_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added as whole tokens but not "special", so decoding with skip_special_tokens keeps them.
TOOL_TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

_SAMPLE_TEXT = [
    "You are a search subagent. Find the documents that answer the question; do not answer it.",
    "Break the query into concepts, search for each one, read promising documents and prune "
    "chunks that do not help.",
    '<tool_call>{"name": "search_corpus", "arguments": {"query": "river delta flooding 1990"}}'
    "</tool_call>",
    '<tool_call>{"name": "grep_corpus", "arguments": {"pattern": "Mar(ch)? [0-9]+"}}</tool_call>',
    '<tool_call>{"name": "read_document", "arguments": {"doc_id": "doc_12"}}</tool_call>',
    '<tool_call>{"name": "prune_chunks", "arguments": {"chunk_ids": ["doc_3_0", "doc_7_2"]}}'
    "</tool_call>",
    "# DOCUMENT ID: doc_4_1 (118 tokens)\nThe bridge was completed in the spring after a long "
    "dispute between the two towns over who would pay for the stone.",
    "[Token usage: 2048/32768] You are above half of the budget: prune or conclude.",
    "Final answer:\n1. doc_4 - describes when the bridge was completed.\n2. doc_9 - names the "
    "engineer who designed it.",
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000; punctuation , . ; : ! ? ( ) [ ] { } \" ' - _ / \\",
]


def sample_corpus() -> list[str]:
    """The built-in training text: tool-call syntax, tool output and plain English."""
    return list(_SAMPLE_TEXT)


def _train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=CHAT_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens(TOOL_TAGS)
    return tok


def build_tiny_tokenizer(vocab_size: int = 1024, corpus_texts: Iterable[str] | None = None) -> Any:
    """A ``PreTrainedTokenizerFast`` with a ChatML template; ``vocab_size`` is the BPE target.

    A small corpus may stop the BPE merges early, so the real size is ``len(tokenizer)``.
    """
    from transformers import PreTrainedTokenizerFast

    texts = list(corpus_texts) if corpus_texts is not None else sample_corpus()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # untyped upstream
        tokenizer_object=_train_tokenizer(texts, vocab_size),
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def build_tiny_model(
    out_dir: str | Path,
    vocab_size: int = 1024,
    hidden: int = 64,
    layers: int = 2,
    seed: int = 0,
    corpus_texts: Iterable[str] | None = None,
) -> Path:
    """Save a random Qwen2 causal LM (tied embeddings) and its locally trained tokenizer to
    ``out_dir`` and return that path. ``vocab_size`` is the BPE target; the model's vocabulary
    is the tokenizer's real size (608 tokens with the built-in sample text).

    Load it back with ``AutoModelForCausalLM.from_pretrained(out_dir)`` /
    ``AutoTokenizer.from_pretrained(out_dir)`` or ``LocalHFPolicy.load(out_dir)``.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(vocab_size, corpus_texts)
    heads = max(1, hidden // 32)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(  # type: ignore[no-untyped-call]
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
