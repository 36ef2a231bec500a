"""The learned text stage: a cross-encoder that reads the question and a passage together.

The selector (:mod:`sleuth.ranking.selector`) judges a document from retrieval and multi-hop
features; it never reads the question and the passage side by side. The text stage does: the
shipped all-MiniLM-L6-v2 encoder over ``[CLS] question [SEP] title: passage [SEP]``, mean
pooled, and one linear unit, fine-tuned here (:mod:`sleuth.train.text_stage`) on training-side
questions with BM25's non-gold hits as hard negatives. It reorders only the agent's final top
:data:`RERANK_TOP` (a later hop's document shares few words with the question, so the selector's
score stays in the sum: :meth:`TextStage.rerank`).

A stage folder holds ``config.json`` (BERT's), ``tokenizer.json``, ``model.safetensors``, its
int8 ONNX export ``int8.onnx`` (the embedder's recipe, :mod:`sleuth.embed.onnx`; what scores, when
present) and ``text_stage.json`` (:class:`TextStageInfo`: what it was trained on, the files'
SHA-256, the fusion weight). Loading checks the checksums, so a torn or swapped file is one clear
error.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sleuth.errors import InputError

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
    """Question + passage are cut to this many tokens (training and scoring alike)."""
    weight: float = 1.0
    """Fusion: final score = z(selector logit) + weight * z(text logit) over the top documents."""
    sha256: str
    """Of ``model.safetensors``."""
    onnx_sha256: str | None = None
    """Of ``int8.onnx``; None: no export, torch scores."""
    question_ids: list[str] = Field(default_factory=list)
    """Every task it was trained on (never evaluate on these)."""
    trained_on: dict[str, Any] = Field(default_factory=dict)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cross_scorer(bert: Any) -> Any:
    """BERT + mean pooling + one linear unit, as a torch module (torch imported on use)."""
    import torch

    class CrossScorer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.head = torch.nn.Linear(bert.config.hidden_size, 1)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out: torch.Tensor = self.head(mean).squeeze(-1)
            return out

    return CrossScorer()


def pair_tokenizer(folder: Path, max_tokens: int) -> Any:
    """The MiniLM tokenizer encoding (question, passage) pairs, the passage cut first."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens, strategy="only_second")
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
    model = cross_scorer(BertModel(config, add_pooling_layer=False))
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
        export_module(torch_scorer(folder), fp32, "logit")
        quantize_int8(fp32, folder / ONNX_FILE)
    return sha256_file(folder / ONNX_FILE)


class TextStage:
    """A trained stage loaded for scoring (thread-safe: parallel runs share one model)."""

    def __init__(self, folder: str | Path, threads: int | None = None, onnx: bool = True):
        self.folder = Path(folder)
        self.info = read_info(self.folder)
        self.tokenizer = pair_tokenizer(self.folder, self.info.max_tokens)
        self._lock = threading.Lock()
        self.session: Any = None
        self.model: Any = None
        if onnx and self.info.onnx_sha256:
            from sleuth.embed.onnx import cpu_session

            self.session = cpu_session(self.folder / ONNX_FILE, threads)
        else:
            self.model = torch_scorer(self.folder)
        self.threads = threads

    def score(self, question: str, passages: Sequence[str]) -> np.ndarray:
        """One logit per passage (higher: more likely gold), in input order; deterministic."""
        if not passages:
            return np.zeros(0, np.float32)
        encodings = self.tokenizer.encode_batch([(question, p) for p in passages])
        ids, mask = padded(encodings)
        if self.session is not None:
            feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
            return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        import torch

        with self._lock, torch.inference_mode():
            if self.threads:
                torch.set_num_threads(self.threads)
            logits = self.model(ids, mask)
        return np.asarray(logits.float().numpy(), dtype=np.float32)

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
