"""Optional rerankers for ``search_corpus`` candidates.

No reranker weights ship on PyPI, so the offline default is none (RRF order). Users can plug
a cross-encoder from a local folder, or an OpenAI-style ``/rerank`` endpoint (vLLM serving
Qwen3-Reranker, TEI, Jina/Cohere-compatible servers).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from sleuth.errors import ConfigError


class Reranker(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Relevance of each text to the query; higher is better."""
        ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder loaded from a local path (never downloaded)."""

    def __init__(self, path: str, device: str = "cpu", batch_size: int = 16):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(path, device=device, local_files_only=True)
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        pairs = [(query, t) for t in texts]
        return [float(s) for s in self.model.predict(pairs, batch_size=self.batch_size)]


class EndpointReranker:
    """POST ``{model, query, documents}`` to ``<base_url>/rerank``; reads ``results[].relevance_score``."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0
    ):
        from openai import OpenAI

        self.client = OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY", "EMPTY"),
            timeout=timeout,
            max_retries=3,
        )
        self.model = model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        body = {"model": self.model, "query": query, "documents": list(texts)}
        resp: Any = self.client.post("/rerank", body=body, cast_to=object)
        scores = [0.0] * len(texts)
        for item in resp["results"]:
            scores[int(item["index"])] = float(item.get("relevance_score", item.get("score", 0.0)))
        return scores


def make_reranker(spec: str | None) -> Reranker | None:
    """``None``/``none``, ``cross-encoder:PATH`` or ``endpoint:MODEL@BASE_URL``."""
    if not spec or spec == "none":
        return None
    if spec.startswith("cross-encoder:"):
        return _cross_encoder(spec.split(":", 1)[1])
    if spec.startswith("endpoint:") and "@" in spec:
        model, url = spec[len("endpoint:") :].split("@", 1)
        return EndpointReranker(url, model)
    raise ConfigError(
        f"unknown reranker {spec!r}; use none, cross-encoder:PATH or endpoint:MODEL@URL"
    )


def _cross_encoder(path: str) -> CrossEncoderReranker:
    """A cross-encoder from a local folder; a missing or unloadable one is a ConfigError (the
    loader would otherwise take the path for a hub repository name)."""
    if not os.path.isdir(path):
        raise ConfigError(
            f"--reranker cross-encoder:{path}: no such folder (give a local cross-encoder model)"
        )
    try:
        return CrossEncoderReranker(path)
    except (OSError, ValueError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise ConfigError(
            f"--reranker cross-encoder:{path}: cannot load a model ({first})"
        ) from None
