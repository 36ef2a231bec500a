"""sleuth: an offline-capable self-editing agentic search subagent.

The Python API (:mod:`sleuth.api`: ``sleuth.Index``, ``sleuth.search``, ``sleuth.asearch``,
``sleuth.Agent``, ``sleuth.evaluate``...) loads on first use, so ``import sleuth`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from sleuth.api import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """``sleuth.Index`` and every other name of :mod:`sleuth.api`, imported on first use."""
    api = import_module("sleuth.api")  # cheap: its names load on first use too
    if name == "api":
        return api
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'sleuth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *import_module("sleuth.api").__all__})
