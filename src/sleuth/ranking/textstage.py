"""The learned text stage: late interaction over the question's and a passage's tokens.

The selector (:mod:`sleuth.ranking.selector`) judges a document from retrieval and multi-hop
features; it never matches the question's words against the passage's in context. The text
stage does, ColBERT-style: the shipped all-MiniLM-L6-v2 encoder reads the question and each
passage (``title: text``) apart; the score is the mean over question tokens of the best cosine
with any passage token, plus the cosine of the two mean-pooled vectors (MiniLM's own sentence
similarity, so the untrained stage already ranks like the embedder). It is fine-tuned here
(:mod:`sleuth.train.text_stage`) on training-side questions with hard negatives, and reorders
only the agent's final top :data:`RERANK_TOP` (a later hop's document shares few words with the
question, so the selector's score stays in the sum: :meth:`TextStage.rerank`). A cross-encoder
(question and passage in one input, a linear head) was tried first and did not learn in the
training time a 2-core machine allows (docs/RESULTS.md).

A stage folder holds ``config.json`` (BERT's), ``tokenizer.json``, ``model.safetensors``, its
int8 ONNX export ``int8.onnx`` (the embedder's recipe, :mod:`sleuth.embed.onnx`; what encodes,
when present) and ``text_stage.json`` (:class:`TextStageInfo`: what it was trained on, the
files' SHA-256, the fusion weight). Loading checks the checksums, so a torn or swapped file is
one clear error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.errors import InputError
from sleuth.io import sha256_file

INFO_FILE = "text_stage.json"
WEIGHTS_FILE = "model.safetensors"
ONNX_FILE = "int8.onnx"
STAGE_FILES = ("config.json", "tokenizer.json", WEIGHTS_FILE, INFO_FILE)
RERANK_TOP = 10
"""Documents of the final list the stage reads (the agent lists 10; R@2 and R@5 live there)."""
SCHEMA_VERSION = 1


class TextStageInfo(BaseModel):
    """``text_stage.json``: how the stage was made and how its score is used."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    max_tokens: int = Field(ge=8)
    """A passage is cut to this many tokens (training and scoring alike)."""
    weight: float = 1.0
    """Fusion: final score = z(selector logit) + weight * z(text score) over the top documents."""
    sha256: str
    """Of ``model.safetensors``."""
    onnx_sha256: str | None = None
    """Of ``int8.onnx``; None: no export, torch scores."""
    question_ids: list[str] = Field(default_factory=list)
    """Every task it was trained on (never evaluate on these)."""
    trained_on: dict[str, Any] = Field(default_factory=dict)


QUESTION_TOKENS = 64
"""A question is cut to this many tokens; a passage to :attr:`TextStageInfo.max_tokens`."""


def encoder(bert: Any) -> Any:
    """BERT's last hidden states as a ``(input_ids, attention_mask) -> hidden`` torch module."""
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden: torch.Tensor = self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]
            return hidden

    return Encoder()


def late_scores(question: Any, question_mask: Any, passages: Any, passage_mask: Any) -> Any:
    """Scores of ``passages`` (n, L, D hidden states) for one question (1, Lq, D): mean over
    question tokens of the best token cosine, plus the mean-pooled vectors' cosine (torch)."""
    import torch
    from torch.nn.functional import normalize

    q_mask, p_mask = question_mask[0].bool(), passage_mask.bool()
    q_tokens = normalize(question[0][q_mask], dim=-1)
    p_tokens = normalize(passages, dim=-1)
    sim = torch.einsum("id,njd->nij", q_tokens, p_tokens)
    sim = sim.masked_fill(~p_mask[:, None, :], -2.0)
    maxsim = sim.max(dim=-1).values.mean(dim=-1)
    q_mean = normalize(_mean(question, question_mask), dim=-1)
    p_mean = normalize(_mean(passages, passage_mask), dim=-1)
    return maxsim + (p_mean @ q_mean[0])


def _mean(hidden: Any, mask: Any) -> Any:
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)


def text_tokenizer(folder: Path, max_tokens: int) -> Any:
    """The MiniLM tokenizer, cutting at ``max_tokens``."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.no_padding()
    return tokenizer


def padded(encodings: Sequence[Any]) -> tuple[Any, Any]:
    """Token ids and attention mask of a batch, padded to its longest member (torch tensors)."""
    import torch

    width = max(len(e.ids) for e in encodings)
    ids = torch.zeros((len(encodings), width), dtype=torch.long)
    mask = torch.zeros((len(encodings), width), dtype=torch.long)
    for k, e in enumerate(encodings):
        ids[k, : len(e.ids)] = torch.tensor(e.ids, dtype=torch.long)
        mask[k, : len(e.ids)] = 1
    return ids, mask


def passage_text(title: str, text: str) -> str:
    """What the stage reads of a document: its title, then its text."""
    return f"{title}: {text}" if title else text


def read_info(folder: Path) -> TextStageInfo:
    """The stage's ``text_stage.json``.

    Raises:
        InputError: a stage file is missing, the info is unreadable, or the weights' checksum
            does not match it.
    """
    missing = [name for name in STAGE_FILES if not (folder / name).is_file()]
    if missing:
        raise InputError(f"not a text stage: missing {', '.join(missing)}", source=str(folder))
    try:
        info = TextStageInfo.model_validate_json((folder / INFO_FILE).read_bytes())
    except (OSError, ValidationError, ValueError) as e:
        reason = str(e).splitlines()[0]
        raise InputError(f"unreadable {INFO_FILE} ({reason})", source=str(folder)) from e
    sums = {WEIGHTS_FILE: info.sha256, ONNX_FILE: info.onnx_sha256}
    for name, digest in sums.items():
        if digest is not None and (
            not (folder / name).is_file() or sha256_file(folder / name) != digest
        ):
            raise InputError(f"{name} does not match its checksum", source=str(folder))
    return info


def torch_scorer(folder: Path) -> Any:
    """The stage's torch module from its folder (eager attention, as the ONNX export traces).

    Raises:
        InputError: the weights do not fit the model.
    """
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    config = BertConfig.from_json_file(str(folder / "config.json"))
    config._attn_implementation = "eager"
    model = encoder(BertModel(config, add_pooling_layer=False))
    try:
        model.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
    except (RuntimeError, OSError, ValueError) as e:
        reason = str(e).splitlines()[0]
        raise InputError(f"cannot load {WEIGHTS_FILE} ({reason})", source=str(folder)) from e
    return model.eval()


def export_int8(folder: Path) -> str:
    """Export the stage's weights to ``int8.onnx`` (fp32 trace, then the embedder's dynamic
    quantisation); returns its SHA-256."""
    import tempfile

    from sleuth.embed.onnx import export_module, quantize_int8

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        export_module(torch_scorer(folder), fp32, "hidden")
        quantize_int8(fp32, folder / ONNX_FILE)
    return sha256_file(folder / ONNX_FILE)


class TextStage:
    """A trained stage loaded for scoring (thread-safe: parallel runs share one model)."""

    def __init__(self, folder: str | Path, threads: int | None = None, onnx: bool = True):
        self.folder = Path(folder)
        self.info = read_info(self.folder)
        self.question_tokenizer = text_tokenizer(self.folder, QUESTION_TOKENS)
        self.tokenizer = text_tokenizer(self.folder, self.info.max_tokens)
        self._lock = threading.Lock()
        self.session: Any = None
        self.model: Any = None
        if onnx and self.info.onnx_sha256:
            from sleuth.embed.onnx import cpu_session

            self.session = cpu_session(self.folder / ONNX_FILE, threads)
        else:
            self.model = torch_scorer(self.folder)
        self.threads = threads

    def _hidden(self, ids: Any, mask: Any) -> Any:
        import torch

        if self.session is not None:
            feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
            return torch.from_numpy(np.asarray(self.session.run(None, feed)[0], np.float32))
        with self._lock, torch.inference_mode():
            if self.threads:
                torch.set_num_threads(self.threads)
            return self.model(ids, mask).float()

    def score(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """One score per passage (higher: more likely gold), in input order; deterministic."""
        if not passages:
            return np.zeros(0, np.float32)
        import torch

        q_ids, q_mask = padded([self.question_tokenizer.encode(question)])
        p_ids, p_mask = padded(self.tokenizer.encode_batch(list(passages)))
        with torch.inference_mode():
            scores = late_scores(
                self._hidden(q_ids, q_mask), q_mask, self._hidden(p_ids, p_mask), p_mask
            )
        return np.asarray(scores.numpy(), dtype=np.float32)

    def rerank(
        self,
        question: str,
        ranked: Sequence[tuple[str, float]],
        text_of: Callable[[str], str],
        top: int = RERANK_TOP,
    ) -> list[tuple[str, float]]:
        """``ranked`` (selector probabilities, best first) with its first ``top`` reordered by
        z(selector logit) + weight * z(text logit); the rest keep their place."""
        head = list(ranked[:top])
        if len(head) < 2:
            return list(ranked)
        text = self.score(question, [text_of(doc) for doc, _ in head])
        probs = np.clip([p for _, p in head], 1e-6, 1 - 1e-6)
        selector = np.log(probs / (1 - probs))
        fused = _z(selector) + self.info.weight * _z(text)
        order = sorted(range(len(head)), key=lambda i: (-fused[i], head[i][0]))
        return [head[i] for i in order] + list(ranked[top:])


def _z(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    spread = values.std()
    return (values - values.mean()) / spread if spread > 1e-9 else np.zeros_like(values)


_loaded: dict[str, TextStage] = {}
_loaded_lock = threading.Lock()


def load_text_stage(folder: str | Path) -> TextStage:
    """The stage in ``folder``, loaded once per process.

    Raises:
        InputError: the folder is not a valid stage (see :func:`read_info`).
    """
    key = str(Path(folder).resolve())
    with _loaded_lock:
        if key not in _loaded:
            _loaded[key] = TextStage(folder)
        return _loaded[key]
