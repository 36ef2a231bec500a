"""sleuth's Python API: what ``import sleuth`` offers (each name also at ``sleuth.NAME``).

The command line and the MCP server call these same functions, so the three cannot drift.

* :class:`Index`: ``Index.create(path, embedder=...)`` / ``Index.open(path)``,
  ``index.ingest(paths_or_records)``, and the policy's tools ``index.search``, ``index.grep``,
  ``index.read`` (each a :class:`ToolResult`); ``Index.attach(path, collection, chroma_path=...)``
  indexes a Chroma collection you already have, ``index.sync()`` follows its changes.
* :func:`search` / :func:`asearch`: the whole subagent on one query with any policy spec
  (:class:`RunResult`: ranked documents with justifications, the trajectory path, timings);
  :class:`Agent` builds the policy once for many queries.
* :func:`evaluate`: a task set, resumable, with reports.
* :func:`adapt` / ``Index.adapt``: fit the learned selector to the index's corpus and store it
  there, so every later search of that index uses it.

Each name is imported from its module on first use, so importing this package (or the MCP
server, which uses :class:`Agent`) does not load the evaluation reports' plotting.
"""

# ruff: noqa: F401  (the imports below are for type checkers; __all__ is built from _WHERE)
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Agent": "sleuth.api.agent",
    "IndexLike": "sleuth.api.agent",
    "PolicyLike": "sleuth.api.agent",
    "asearch": "sleuth.api.agent",
    "evaluate": "sleuth.api.agent",
    "open_tools": "sleuth.api.agent",
    "search": "sleuth.api.agent",
    "Index": "sleuth.api.index",
    "adapt": "sleuth.api.index",
    "Source": "sleuth.api.index",
    "load_documents": "sleuth.api.index",
    "sync_attached": "sleuth.api.index",
    "Document": "sleuth.corpus.models",
    "InputError": "sleuth.errors",
    "SleuthError": "sleuth.errors",
    "EvalConfig": "sleuth.eval.runner",
    "HarnessConfig": "sleuth.harness.loop",
    "RankedDocument": "sleuth.harness.run",
    "RunResult": "sleuth.harness.run",
    "RunTimings": "sleuth.harness.run",
    "IngestResult": "sleuth.index.manifest",
    "SyncResult": "sleuth.index.manifest",
    "PolicyOptions": "sleuth.policies.spec",
    "Task": "sleuth.tasks.schema",
    "ToolConfig": "sleuth.tools.toolbox",
    "ChunkHit": "sleuth.tools.types",
    "ToolResult": "sleuth.tools.types",
}
__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from sleuth.api.agent import (
        Agent,
        IndexLike,
        PolicyLike,
        asearch,
        evaluate,
        open_tools,
        search,
    )
    from sleuth.api.index import Index, Source, adapt, load_documents, sync_attached
    from sleuth.corpus.models import Document
    from sleuth.errors import InputError, SleuthError
    from sleuth.eval.runner import EvalConfig
    from sleuth.harness.loop import HarnessConfig
    from sleuth.harness.run import RankedDocument, RunResult, RunTimings
    from sleuth.index.manifest import IngestResult, SyncResult
    from sleuth.policies.spec import PolicyOptions
    from sleuth.tasks.schema import Task
    from sleuth.tools.toolbox import ToolConfig
    from sleuth.tools.types import ChunkHit, ToolResult


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
