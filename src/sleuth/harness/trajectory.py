"""The full, unpruned record of one run, written as versioned JSONL while the run goes.

File layout, one JSON object per line, each with ``kind`` and ``schema_version``:

* ``header``: run id, query, system prompt, user message, tool schemas, settings, policy name;
* ``turn``: one per policy call, appended (and flushed) as soon as the turn ends: the exact
  messages sent, the policy output (text, reasoning, token ids, log-probs), every tool call
  with its parsed arguments and full result, prune events, usage and timings;
* ``end``: the parsed final answer, the stop reason, any error and the wall time.

A crashed process loses at most the turn in progress; the file is fsynced once, with its ``end``
line (an fsync per turn cost a default-agent question ~20 ms, benchmarks/agent_speed.py), so a
power loss mid-run may lose its turns too. :func:`load_trajectory` rebuilds what was written,
with ``stop_reason`` left ``None`` when the ``end`` line is missing.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from sleuth.errors import InputError, describe_validation_error
from sleuth.harness.answer import ParsedAnswer
from sleuth.harness.policy import PolicyOutput
from sleuth.harness.summary import RunSummary
from sleuth.io import append_jsonl, atomic_write_text, json_text, read_jsonl
from sleuth.tools.types import ToolResult

_M = TypeVar("_M", bound=BaseModel)

SCHEMA_VERSION = 1


class StopReason(StrEnum):
    """Every way a run can end."""

    ANSWERED = "answered"
    """The policy replied without tool calls and the reply held a document list."""
    MALFORMED_ANSWER = "malformed_answer"
    """The policy replied without tool calls but no document block parsed (fallback ids kept)."""
    MAX_TURNS = "max_turns"
    """``BudgetConfig.max_turns`` policy calls went by without a final answer."""
    BUDGET_EXHAUSTED = "budget_exhausted"
    """The next request could not be fitted under the token budget."""
    POLICY_ERROR = "policy_error"
    """The policy raised (endpoint down, time-out after its retries, a bug in a policy)."""
    INTERRUPTED = "interrupted"
    """Interrupted or crashed inside the harness; recorded, then re-raised."""


class CallStatus(StrEnum):
    """What became of one tool call."""

    OK = "ok"
    TOOL_ERROR = "tool_error"  # the tool returned an error or raised
    INVALID = "invalid"  # unknown tool, broken JSON or wrong argument types
    REJECTED = "rejected"  # refused by the budget (hard cutoff or no room left this turn)


class PruneEvent(BaseModel):
    requested: list[str]
    pruned: list[str]  # were visible, now hidden
    unknown: list[str]  # never shown, or already pruned


class ToolEvent(BaseModel):
    """One tool call and everything it produced, before any later pruning."""

    call_id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None = None  # None when the call was invalid
    status: CallStatus
    max_tokens: int | None = None  # output allowance granted to the tool
    read_query: str | None = None  # query passed to read_document (the one that surfaced the doc)
    result: ToolResult | None = None  # full result as the tool returned it
    shown_ids: list[str] = Field(default_factory=list)  # chunk ids the policy was shown
    dropped_ids: list[str] = Field(default_factory=list)  # returned but not shown (dup / budget)
    observation: str = ""  # the text the policy saw when the result was first shown
    prune: PruneEvent | None = None
    started_s: float = 0.0  # offset from the start of the run
    duration_s: float = 0.0


class TurnTimings(BaseModel):
    policy_s: float = 0.0
    tools_s: float = 0.0  # wall time of the turn's tool execution (parallel calls overlap)
    harness_s: float = 0.0  # everything else: rendering, counting, bookkeeping


class Turn(BaseModel):
    """One policy call and the observations it led to."""

    index: int
    messages: list[dict[str, Any]]  # exactly what the policy was sent
    prompt_tokens: int  # policy-tokenizer count of ``messages`` + tool schemas
    max_tokens: int  # generation limit passed to the policy
    output: PolicyOutput | None = None
    error: str | None = None  # set when the policy raised
    tool_events: list[ToolEvent] = Field(default_factory=list)
    allowance: int | None = None  # tool output tokens available to this turn
    over_soft: bool = False  # the prune-or-conclude message was added after this turn
    over_hard: bool = False  # non-prune calls were refused this turn
    usage_after: int | None = None  # X in the usage line that ended this turn
    timings: TurnTimings = Field(default_factory=TurnTimings)


class Trajectory(BaseModel):
    schema_version: int = SCHEMA_VERSION
    run_id: str
    started_at: str  # ISO 8601, UTC
    query: str
    policy: str
    system_prompt: str
    user_message: str
    tool_schemas: list[dict[str, Any]]
    settings: dict[str, Any]
    turns: list[Turn] = Field(default_factory=list)
    answer: ParsedAnswer | None = None
    stop_reason: StopReason | None = None  # None while running, or when the run was cut off
    error: str | None = None
    wall_time_s: float = 0.0

    def tool_events(self) -> list[ToolEvent]:
        return [e for t in self.turns for e in t.tool_events]

    def seen_chunks(self) -> dict[str, str]:
        """Every chunk the policy was shown, pruned or not: id -> text."""
        seen: dict[str, str] = {}
        for event in self.tool_events():
            if event.result is not None:
                shown = set(event.shown_ids)
                seen.update((c.id, c.text) for c in event.result.chunks if c.id in shown)
        return seen

    def summary(self) -> RunSummary:
        """The flat view that metrics and reward read."""
        answered = [t for t in self.turns if t.output is not None]
        error = self.error
        if error is None and self.stop_reason is None:
            error = "trajectory cut off before it finished"  # a crash: no ε floor
        elif error is None and self.answer is None:
            error = f"no final answer ({self.stop_reason})"
        return RunSummary(
            final_doc_ids=self.answer.doc_ids if self.answer else [],
            seen_chunks=self.seen_chunks(),
            pruned_chunk_ids=[i for e in self.tool_events() if e.prune for i in e.prune.requested],
            turn_tools=[[e.name for e in t.tool_events] for t in answered],
            peak_tokens=max((t.prompt_tokens for t in self.turns), default=0),
            total_tokens=sum(t.prompt_tokens + _completion_tokens(t.output) for t in answered),
            wall_time_s=self.wall_time_s,
            malformed_answer=bool(self.answer and self.answer.malformed),
            error=error,
        )


def _completion_tokens(output: PolicyOutput | None) -> int:
    if output is None:
        return 0
    if output.token_ids is not None:
        return len(output.token_ids)
    return output.usage.get("completion_tokens", 0)


_END_FIELDS = ("answer", "stop_reason", "error", "wall_time_s")


class TrajectoryWriter:
    """Writes one trajectory file as the run goes, each line flushed, the file fsynced at its
    end. ``path=None``: no-op."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None

    def start(self, trajectory: Trajectory) -> None:
        """Write the header, replacing any older file at the path."""
        if self.path is not None:
            header = trajectory.model_dump(mode="json", exclude={"turns", *_END_FIELDS})
            atomic_write_text(self.path, json_text({"kind": "header", **header}) + "\n")

    def turn(self, turn: Turn) -> None:
        if self.path is not None:
            record = {"kind": "turn", "schema_version": SCHEMA_VERSION}
            append_jsonl(self.path, record | turn.model_dump(mode="json"), sync=False)

    def end(self, trajectory: Trajectory) -> None:
        if self.path is not None:
            record = {"kind": "end", "schema_version": SCHEMA_VERSION}
            end = trajectory.model_dump(mode="json", include=set(_END_FIELDS))
            append_jsonl(self.path, record | end)


def load_trajectory(path: str | Path) -> Trajectory:
    """Rebuild a trajectory from its JSONL file (a run cut off mid-way loads what was written).

    Raises:
        InputError: the file is missing or not a trajectory (no header, a line that is not a
            record of this schema version); the message names the file and the line.
    """
    header: dict[str, Any] | None = None
    turns: list[Turn] = []
    end: dict[str, Any] = {}
    source = str(path)
    for n, record in enumerate(read_jsonl(path, fix="is it a trajectory sleuth wrote?"), start=1):
        version = record.pop("schema_version", None)
        if version != SCHEMA_VERSION:
            raise InputError(
                f"schema_version {version}, expected {SCHEMA_VERSION}", source=source, record=str(n)
            )
        kind = record.pop("kind", None)
        if kind == "header":
            header = record
        elif kind == "turn":
            turns.append(_validated(Turn, record, source, n))
        elif kind == "end":
            end = record
    if header is None:
        raise InputError("no header line; not a sleuth trajectory", source=source)
    return _validated(Trajectory, {**header, **end, "turns": turns}, source, None)


def _validated(model: type[_M], data: dict[str, Any], source: str, line: int | None) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        where = f"line {line}: " if line else ""
        raise InputError(
            f"{where}not a valid {model.__name__.lower()} ({describe_validation_error(e)})",
            source=source,
        ) from None
