"""Running one turn's tool calls: dispatch, concurrency, dedup and cutting results to fit.

Calls of one turn run concurrently on a thread pool (retrieval is I/O- or native-bound, so
threads overlap well) and their results come back in call order. A call that raises or runs
past its time limit becomes an error result; nothing here lets an exception escape.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import Executor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from sleuth.errors import ToolError
from sleuth.tools.base import Tools
from sleuth.tools.spec import TOOL_BY_NAME
from sleuth.tools.types import ToolResult

_FAILURE_CHARS = 500  # a store's error can quote whole requests back


@dataclass(frozen=True)
class ToolJob:
    """One call ready to run: the tool, its argument, and the harness-side limits."""

    name: str
    argument: str  # the query, pattern or doc id
    max_tokens: int | None  # None: the tool's own limit (MCP callers)
    exclude: Collection[str] = ()
    read_query: str | None = None
    where: dict[str, Any] | None = None  # a metadata filter (search_corpus, grep_corpus)


@dataclass(frozen=True)
class JobOutcome:
    result: ToolResult
    started: float  # perf_counter() when the call started
    duration_s: float


def call_tool(tools: Tools, job: ToolJob) -> ToolResult:
    """Dispatch one job; a tool exception becomes an error result the policy can read."""
    try:
        spec = TOOL_BY_NAME.get(job.name)
        if spec is None or spec.run is None:
            raise ValueError(f"not a retrieval tool: {job.name}")
        result = spec.run(
            tools, job.argument, job.exclude, job.max_tokens, job.read_query, job.where
        )
    except ToolError as exc:
        return ToolResult(tool=job.name, error=str(exc))
    except Exception as exc:  # a tool bug or a store down must not end the run
        return ToolResult(tool=job.name, error=failure_text(exc))
    if not isinstance(result, ToolResult):
        return ToolResult(tool=job.name, error=f"the tool returned {type(result).__name__}")
    return result


def failure_text(exc: BaseException) -> str:
    """What broke, for the caller: the exception's type and message, cut to a readable size."""
    text = f"the tool failed: {type(exc).__name__}: {exc}"
    return text if len(text) <= _FAILURE_CHARS else f"{text[:_FAILURE_CHARS]}… [cut]"


def error_text(exc: BaseException) -> str:
    """``Type: message`` of a policy's failure, with the request and the root cause when an HTTP
    client raised it: ``APIConnectionError: Connection error.`` alone names neither the endpoint
    nor why (``(POST http://host/v1/chat/completions: [Errno 111] Connection refused)``)."""
    text = f"{type(exc).__name__}: {exc}"
    request = getattr(exc, "request", None)
    root, seen = exc, {id(exc)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        root, seen = nxt, seen | {id(nxt)}
    where = f"{getattr(request, 'method', '')} {getattr(request, 'url', '')}".strip()
    cause = str(root) if root is not exc else ""
    detail = ": ".join(p for p in (where, cause) if p)
    text = " ".join((f"{text} ({detail})" if detail else text).split())  # one line
    return text if len(text) <= _FAILURE_CHARS else f"{text[:_FAILURE_CHARS]}… [cut]"


def _timed(tools: Tools, job: ToolJob) -> JobOutcome:
    start = perf_counter()
    result = call_tool(tools, job)
    return JobOutcome(result, start, perf_counter() - start)


def run_jobs(
    tools: Tools, jobs: list[ToolJob], executor: Executor | None, timeout_s: float | None
) -> list[JobOutcome]:
    """Run ``jobs`` (concurrently when an executor is given); outcomes in job order."""
    if executor is None:
        return [_timed(tools, job) for job in jobs]
    submitted = perf_counter()
    futures = [executor.submit(_timed, tools, job) for job in jobs]
    outcomes = []
    for job, future in zip(jobs, futures, strict=True):
        left = None if timeout_s is None else max(timeout_s - (perf_counter() - submitted), 0.0)
        try:
            outcomes.append(future.result(timeout=left))
        except FutureTimeout:
            future.cancel()
            error = f"the tool did not answer within {timeout_s:g} s"
            elapsed = perf_counter() - submitted
            outcomes.append(JobOutcome(ToolResult(tool=job.name, error=error), submitted, elapsed))
    return outcomes


def drop_chunks(
    result: ToolResult, ids: Collection[str], note: str
) -> tuple[ToolResult, list[str]]:
    """A copy of ``result`` without the chunks in ``ids``, with ``note`` added when any went."""
    kept = [c for c in result.chunks if c.id not in ids]
    dropped = [c.id for c in result.chunks if c.id in ids]
    if not dropped:
        return result, []
    return result.model_copy(update={"chunks": kept, "note": _join(result.note, note)}), dropped


def keep_first(result: ToolResult, keep: int) -> ToolResult:
    """A copy of ``result`` with only its first ``keep`` chunks, saying how many were cut."""
    cut = len(result.chunks) - keep
    if cut <= 0:
        return result
    note = f"[{cut} more chunk(s) were left out to fit the context budget.]"
    return result.model_copy(
        update={"chunks": result.chunks[:keep], "note": _join(result.note, note)}
    )


def _join(first: str | None, second: str) -> str:
    return f"{first}\n{second}" if first else second
