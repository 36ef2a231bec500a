"""One call from a query to the ranked documents: what ``sleuth run --json`` prints (SPEC §8)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from uuid import uuid4

from pydantic import BaseModel, Field

from sleuth.errors import InputError
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.policy import Policy
from sleuth.harness.trajectory import Trajectory
from sleuth.tokens import sleuth_home
from sleuth.tools.base import Tools

RUN_SCHEMA_VERSION = 1


class RankedDocument(BaseModel):
    """One document of the final list: its id, its rank (1 = best) and why it was chosen."""

    id: str
    rank: int
    justification: str


class RunTimings(BaseModel):
    """Where one run's seconds went (sums over its turns; parallel tool calls overlap)."""

    wall_s: float = 0.0
    """The whole run, first prompt to final answer."""
    policy_s: float = 0.0
    """Waiting for the policy's replies."""
    tools_s: float = 0.0
    """Running tool calls."""
    harness_s: float = 0.0
    """Everything else: rendering, counting, bookkeeping."""


class RunResult(BaseModel):
    """What one run of the subagent produced: the ``sleuth run --json`` object (SPEC §8) and the
    structured content of the MCP ``search`` tool.

    ``result["documents"]`` reads as the JSON mapping does (a list of plain dicts), for callers
    written against the mapping."""

    schema_version: int = RUN_SCHEMA_VERSION
    documents: list[RankedDocument]
    """Document ids, best first, each once."""
    trajectory: str
    """Path of the trajectory JSONL."""
    turns: int
    tool_calls: int
    peak_tokens: int
    stop_reason: str
    malformed: bool
    error: str | None
    timings: RunTimings = Field(default_factory=RunTimings)

    def __getitem__(self, key: str) -> object:
        return self.model_dump(mode="json")[key]


def run_query(
    tools: Tools,
    query: str,
    *,
    policy: Policy,
    budget: int | None = None,
    trajectory: str | Path | None = None,
    config: HarnessConfig | None = None,
) -> RunResult:
    """Run the subagent on ``query`` and return the SPEC §8 ``sleuth run --json`` object.

    Args:
        tools: the retrieval tools (the CLI passes a ``Toolbox`` over the index).
        query: the question to find documents for.
        policy: a fresh policy (build one from a spec with :func:`sleuth.policies.make_policy`).
        budget: token budget T; the soft and hard thresholds follow it (report §2.4).
        trajectory: where to write the trajectory JSONL; default
            ``$SLEUTH_HOME/runs/<id>.jsonl``.
        config: harness settings; ``budget`` overrides its T when given.

    Returns:
        a :class:`RunResult` (``model_dump(mode="json")`` is the JSON object).

    Raises:
        InputError: the query is blank, or the budget is out of range.
    """
    config = _with_budget(config or HarnessConfig(), budget)
    path = Path(trajectory) if trajectory else sleuth_home() / "runs" / f"{uuid4().hex}.jsonl"
    record = Harness(tools, policy, config).run(query, path)
    return run_result(record, path)


def run_result(record: Trajectory, path: Path) -> RunResult:
    """The ``sleuth run --json`` object of a finished trajectory."""
    summary = record.summary()
    documents: list[RankedDocument] = []
    for entry in record.answer.documents if record.answer else []:
        if all(d.id != entry.doc_id for d in documents):
            rank = len(documents) + 1
            documents.append(
                RankedDocument(id=entry.doc_id, rank=rank, justification=entry.justification)
            )
    return RunResult(
        documents=documents,
        trajectory=str(path),
        turns=summary.turns,
        tool_calls=summary.tool_calls,
        peak_tokens=summary.peak_tokens,
        stop_reason=str(record.stop_reason),
        malformed=summary.malformed_answer,
        error=summary.error,
        timings=RunTimings(
            wall_s=record.wall_time_s,
            policy_s=sum(t.timings.policy_s for t in record.turns),
            tools_s=sum(t.timings.tools_s for t in record.turns),
            harness_s=sum(t.timings.harness_s for t in record.turns),
        ),
    )


def _with_budget(config: HarnessConfig, total: int | None) -> HarnessConfig:
    if total is None or total == config.budget.total:
        return config
    try:
        budget = replace(config.budget, total=total, soft_threshold=None, hard_cutoff=None)
    except ValueError as exc:
        raise InputError(f"--budget {total}: {exc}") from exc
    return replace(config, budget=budget)
