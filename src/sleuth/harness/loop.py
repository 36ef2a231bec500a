"""The agent loop: observe -> infer -> act until the policy answers.

Every limit is enforced here, in this order, once per turn:

1. The policy is sent the current view (X tokens, counted by the policy itself on exactly what
   is sent) and may generate up to T - X tokens (or ``max_reply_tokens``). If it raises, the
   run ends with ``policy_error``.
2. A reply without tool calls ends the run as the final answer; a blank one is first answered
   with a nudge, ``empty_retries`` times.
3. Invalid calls (unknown tool, broken JSON, wrong types) become error observations.
   ``prune_chunks`` calls are applied first, so the space they free serves the same turn.
4. If the context the policy was shown, less what this turn's prunes freed, is above the hard
   cutoff, every retrieval call is refused. Otherwise the turn's allowance,
   T - reply_reserve - U (U: the context with the new assistant message), is split evenly over
   its retrieval calls (``split_allowance``); a call that gets no share is refused.
5. Retrieval calls run concurrently; results come back in call order. With dedup, searches and
   greps exclude every chunk already shown, and a chunk two calls of one turn both returned is
   shown once (in the earlier call).
6. If the view still exceeds T - reply_reserve (tools count tokens their own way), chunks are
   cut from the end of the latest results until it fits, and the result says so.
7. The last observation gets the prune-or-conclude message (past the soft threshold) and ends
   with ``[Token usage: X/T]``, X being the exact count of the next request. If even without
   new chunks X would exceed T, the run ends with ``budget_exhausted``.
8. After ``max_turns`` policy calls the run ends with ``max_turns``.
"""

from __future__ import annotations

import json
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Any
from uuid import uuid4

from sleuth.errors import ConfigError, InputError
from sleuth.harness.act import JobOutcome, ToolJob, drop_chunks, error_text, keep_first, run_jobs
from sleuth.harness.answer import parse_answer
from sleuth.harness.budget import (
    BudgetConfig,
    hard_rejection,
    no_room_error,
    reply_tokens,
    soft_message,
    split_allowance,
    usage_line,
)
from sleuth.harness.calls import ParsedCall, arguments_json, parse_call
from sleuth.harness.policy import Policy, PolicyOutput, ToolCall, assistant_message
from sleuth.harness.prompt import MAX_DOCUMENTS, system_prompt, user_message
from sleuth.harness.trajectory import (
    CallStatus,
    PruneEvent,
    StopReason,
    ToolEvent,
    Trajectory,
    TrajectoryWriter,
    Turn,
)
from sleuth.harness.view import ContextView, Message, Observation
from sleuth.io import safe_text
from sleuth.tools.base import Tools
from sleuth.tools.spec import PRUNE, READ, SEARCH, TOOL_BY_NAME, TOOL_NAMES, WHERE, tool_schemas
from sleuth.tools.types import ToolResult

_SETTLE_ROUNDS = 4  # usage-line fixed point; digit-grouping tokenizers settle in one or two
_DUPLICATE_NOTE = "[Chunks you were already shown were left out.]"
_EMPTY_REPLY_NUDGE = (
    "Your reply was empty. Continue with tool calls, or give your final answer as a list of "
    '<Document id="..."> entries.'
)

Stop = tuple[StopReason, str | None]


@dataclass(frozen=True)
class HarnessConfig:
    """How the loop runs; token limits live in ``budget``."""

    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """Token budget and turn limit (report §2.4)."""
    parallel_tools: bool = True
    """Run one turn's tool calls concurrently (SPEC §3); False runs them in call order."""
    max_workers: int = 8
    """Threads for concurrent tool calls."""
    tool_timeout_s: float | None = 120.0
    """A concurrent call still running after this becomes an error result (None: wait)."""
    dedup: bool = True
    """Exclude every chunk already shown from later searches and greps (report §2.3)."""
    max_documents: int = MAX_DOCUMENTS
    """Length of the final list asked for and parsed (report §2.6: 30)."""
    empty_retries: int = 1
    """Blank replies (no text, no tool calls) answered with a nudge before giving up."""
    max_reply_tokens: int | None = None
    """Cap on each reply's generation limit; None lets a reply use all of T - X (report)."""
    echo_reasoning: bool = False
    """Send the policy's reasoning back as ``reasoning_content`` in its assistant messages."""
    system_prompt: str | None = None
    """Override the built-in system prompt (``sleuth.harness.prompt``)."""
    tools: tuple[str, ...] = tuple(TOOL_NAMES)
    """The tools offered to the policy (an adapter keeps the set it was trained with)."""

    def __post_init__(self) -> None:
        unknown = [t for t in self.tools if t not in TOOL_NAMES]
        if unknown or not self.tools:
            raise ConfigError(f"tools {list(self.tools)}: use names from {TOOL_NAMES}")
        if self.max_workers < 1:
            raise ConfigError(f"max_workers ({self.max_workers}) must be at least 1")
        if self.max_documents < 1:
            raise ConfigError(f"max_documents ({self.max_documents}) must be at least 1")
        if self.empty_retries < 0:
            raise ConfigError(f"empty_retries ({self.empty_retries}) must not be negative")


class Harness:
    """The self-editing search subagent: a policy, the retrieval tools and the budget.

    Example::

        harness = Harness(toolbox, OpenAIChatPolicy("context-1", base_url=URL))
        trajectory = harness.run("Which ...?", trajectory_path="run.jsonl")
        trajectory.answer.doc_ids
    """

    def __init__(self, tools: Tools, policy: Policy, config: HarnessConfig | None = None):
        self.tools = tools
        self.policy = policy
        self.config = config or HarnessConfig()

    def run(self, query: str, trajectory_path: str | Path | None = None) -> Trajectory:
        """Run the subagent on one query; the trajectory is also written to ``trajectory_path``.

        Raises:
            InputError: the query is blank.
        """
        if not query.strip():
            raise InputError("the query is empty")
        return _Episode(self, safe_text(query), trajectory_path).run()


class _Episode:
    """The state of one run: the view, the dedup sets and the record being written."""

    def __init__(self, harness: Harness, query: str, path: str | Path | None):
        self.tools = harness.tools
        self.policy = harness.policy
        self.config = harness.config
        self.budget = harness.config.budget
        self.query = query
        self.schemas = tool_schemas(self.config.tools)
        system = self.config.system_prompt or system_prompt(
            self.config.max_documents, self.config.tools
        )
        user = user_message(query)
        self.view = ContextView(system, user)
        self.record = Trajectory(
            run_id=uuid4().hex,
            started_at=datetime.now(UTC).isoformat(),
            query=query,
            policy=str(getattr(self.policy, "name", type(self.policy).__name__)),
            system_prompt=system,
            user_message=user,
            tool_schemas=self.schemas,
            settings=_settings(self.config, self.policy),
        )
        self.writer = TrajectoryWriter(path)
        self.exclude: set[str] = set()  # every chunk id shown so far (dedup)
        self.known: dict[str, str] = {}  # chunk id -> doc id, every chunk shown so far
        self.first_query: dict[str, str] = {}  # doc id -> the search query that surfaced it
        self.call_ids: set[str] = set()
        self.nudges_left = self.config.empty_retries
        self.started = perf_counter()
        self.usage = 0

    def run(self) -> Trajectory:
        self.writer.start(self.record)
        executor = (
            ThreadPoolExecutor(self.config.max_workers, thread_name_prefix="sleuth-tool")
            if self.config.parallel_tools
            else None
        )
        try:
            reason, error = self._loop(executor)
        except BaseException as exc:  # record what happened, then let it propagate
            self._finish(StopReason.INTERRUPTED, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)
        self._finish(reason, error)
        return self.record

    def _loop(self, executor: Executor | None) -> Stop:
        self.usage = self._count()
        if self.usage > self.budget.observation_limit:
            return StopReason.BUDGET_EXHAUSTED, (
                f"the system prompt and query take {self.usage} tokens; the budget leaves "
                f"{self.budget.observation_limit} before the reply reserve"
            )
        for index in range(self.budget.max_turns):
            stop = self._turn(index, executor)
            if stop is not None:
                return stop
        return StopReason.MAX_TURNS, None

    def _turn(self, index: int, executor: Executor | None) -> Stop | None:
        started = perf_counter()
        messages = self.view.messages()
        limit = reply_tokens(self.usage, self.budget, self.config.max_reply_tokens)
        turn = Turn(index=index, messages=messages, prompt_tokens=self.usage, max_tokens=limit)
        try:
            output = self.policy.generate(messages, self.schemas, limit)
            if not isinstance(output, PolicyOutput):
                raise TypeError(f"policy returned {type(output).__name__}, not PolicyOutput")
            output = _untrusted(output)
        except Exception as exc:  # endpoint down, time-out after retries, policy bug
            turn.error = error_text(exc)
            turn.timings.policy_s = perf_counter() - started
            self._record(turn, started)
            return StopReason.POLICY_ERROR, turn.error
        turn.timings.policy_s = perf_counter() - started
        turn.output = output
        if output.tool_calls:
            stop = self._act(turn, output, executor)
        elif not output.text.strip() and self.nudges_left > 0:
            stop = self._nudge(turn, output)
        else:
            stop = self._answer(output)
        self._record(turn, started)
        return stop

    # ---- final answer and blank replies -------------------------------------------------

    def _answer(self, output: PolicyOutput) -> Stop:
        answer = parse_answer(
            output.text,
            reasoning=output.reasoning,
            known_chunks=self.known,
            max_documents=self.config.max_documents,
        )
        self.record.answer = answer
        return (StopReason.MALFORMED_ANSWER if answer.malformed else StopReason.ANSWERED), None

    def _nudge(self, turn: Turn, output: PolicyOutput) -> Stop | None:
        self.nudges_left -= 1
        self.view.add_message(self._assistant_message(output, []))
        self.view.add_observation(Observation(body=_EMPTY_REPLY_NUDGE))
        return self._settle(turn)

    # ---- tool calls ---------------------------------------------------------------------

    def _act(self, turn: Turn, output: PolicyOutput, executor: Executor | None) -> Stop | None:
        calls = self._unique_ids(output.tool_calls, turn.index)
        parsed = [parse_call(c, self.config.tools) for c in calls]
        events = [_event(c, p) for c, p in zip(calls, parsed, strict=True)]
        bodies = [f"Error: {p}" if isinstance(p, str) else "" for p in parsed]
        for i, p in enumerate(parsed):
            if isinstance(p, ParsedCall) and p.name == PRUNE.name:
                bodies[i] = self._prune(p.args[PRUNE.argument], events[i])
        gate = self._count() if any(e.prune for e in events) else self.usage
        self.view.add_message(self._assistant_message(output, calls))
        slots = [
            self.view.add_observation(Observation(body=b, call_id=c.id))
            for c, b in zip(calls, bodies, strict=True)
        ]
        turn.tool_events = events
        jobs = self._plan(turn, gate, parsed, events, slots)
        tools_started = perf_counter()
        outcomes = run_jobs(
            self.tools, [job for _, job in jobs], executor, self.config.tool_timeout_s
        )
        turn.timings.tools_s = perf_counter() - tools_started
        self._deliver(jobs, outcomes, events, slots)
        self._fit(events, slots)
        self._register(events, slots)
        return self._settle(turn)

    def _prune(self, ids: list[str], event: ToolEvent) -> str:
        pruned, unknown = self.view.prune(ids)
        event.prune = PruneEvent(requested=ids, pruned=pruned, unknown=unknown)
        parts = [f"Pruned {len(pruned)} chunk(s)" + (f": {', '.join(pruned)}." if pruned else ".")]
        if unknown:
            parts.append(f"Not in your context (unknown or already pruned): {', '.join(unknown)}.")
        return " ".join(parts)

    def _plan(
        self,
        turn: Turn,
        gate: int,
        parsed: list[ParsedCall | str],
        events: list[ToolEvent],
        slots: list[Observation],
    ) -> list[tuple[int, ToolJob]]:
        """Refuse or size every retrieval call (step 4 of the module docstring).

        ``gate`` is the context the policy was shown, less what this turn's prunes freed.
        """
        turn.over_hard = gate > self.budget.hard
        slots[-1].suffix = self._suffix(self.budget.total, over_soft=True)  # the widest suffix
        used = self._count()
        turn.allowance = self.budget.observation_limit - used
        retrieval = [
            i for i, p in enumerate(parsed) if isinstance(p, ParsedCall) and p.name != PRUNE.name
        ]
        if turn.over_hard:
            shares: list[int | None] = [None] * len(retrieval)
            refusal = hard_rejection(gate, self.budget)
        else:
            shares = split_allowance(turn.allowance, len(retrieval), self.budget)
            refusal = no_room_error(used, self.budget)
        exclude = frozenset(self.exclude) if self.config.dedup else frozenset()
        jobs: list[tuple[int, ToolJob]] = []
        for i, share in zip(retrieval, shares, strict=True):
            call = parsed[i]
            assert isinstance(call, ParsedCall)
            if share is None:
                events[i].status = CallStatus.REJECTED
                slots[i].body = f"Error: {refusal}"
                continue
            events[i].max_tokens = share
            jobs.append((i, self._job(call, share, exclude, events[i])))
        return jobs

    def _job(
        self, call: ParsedCall, share: int, exclude: frozenset[str], event: ToolEvent
    ) -> ToolJob:
        argument = call.args.get(TOOL_BY_NAME[call.name].argument, "")
        if call.name == READ.name:
            event.read_query = self._read_query(argument)
            return ToolJob(call.name, argument, share, read_query=event.read_query)
        where = call.args.get(WHERE)
        return ToolJob(call.name, argument, share, exclude=exclude, where=where)

    def _read_query(self, doc_id: str) -> str:
        """The search query that first surfaced this document, else the user's query."""
        return self.first_query.get(self.known.get(doc_id, doc_id), self.query)

    def _deliver(
        self,
        jobs: list[tuple[int, ToolJob]],
        outcomes: list[JobOutcome],
        events: list[ToolEvent],
        slots: list[Observation],
    ) -> None:
        """Record full results; show each chunk once (step 5)."""
        shown_now: set[str] = set()
        for (i, job), outcome in zip(jobs, outcomes, strict=True):
            event, result = events[i], outcome.result
            event.result = result
            event.started_s = outcome.started - self.started
            event.duration_s = outcome.duration_s
            if not result.ok:
                event.status = CallStatus.TOOL_ERROR
            elif self.config.dedup and job.name != READ.name:
                result, event.dropped_ids = drop_chunks(
                    result, self.exclude | shown_now, _DUPLICATE_NOTE
                )
            shown_now.update(c.id for c in result.chunks)
            slots[i].body = result

    def _fit(self, events: list[ToolEvent], slots: list[Observation]) -> None:
        """Cut chunks from the end of the latest results until the view fits (step 6)."""
        limit = self.budget.observation_limit
        if self._count() <= limit:
            return
        for i in reversed(range(len(slots))):
            full = slots[i].body
            if not isinstance(full, ToolResult) or not full.chunks:
                continue
            keep = len(full.chunks)
            while keep > 0 and self._count() > limit:
                keep -= 1
                slots[i].body = keep_first(full, keep)
            events[i].dropped_ids += [c.id for c in full.chunks[keep:]]
            if keep > 0:
                return

    def _register(self, events: list[ToolEvent], slots: list[Observation]) -> None:
        """Remember what the policy was shown: dedup set, chunk owners, first queries."""
        for event, slot in zip(events, slots, strict=True):
            event.observation = slot.text(self.view.hidden)
            if not isinstance(slot.body, ToolResult) or not slot.body.ok:
                continue
            event.shown_ids = [i for i in slot.chunk_ids() if i not in self.view.hidden]
            for chunk in slot.body.chunks:
                self.known[chunk.id] = chunk.doc_id
                self.exclude.add(chunk.id)
                if event.name == SEARCH.name and event.arguments:
                    self.first_query.setdefault(chunk.doc_id, event.arguments[SEARCH.argument])

    # ---- usage line and bookkeeping -----------------------------------------------------

    def _settle(self, turn: Turn) -> Stop | None:
        """End the last observation with the exact usage line (step 7)."""
        last = self.view.last_observation()
        assert last is not None  # every settled turn added an observation
        last.suffix = usage_line(self.budget.total, self.budget.total)
        used = self._count()
        over_soft = self.budget.warn_at_soft and used > self.budget.soft
        for _ in range(_SETTLE_ROUNDS):
            last.suffix = self._suffix(used, over_soft)
            counted = self._count()
            if counted == used:
                break
            used = counted
        self.usage = counted
        turn.over_soft = over_soft
        turn.usage_after = counted
        if counted > self.budget.total:
            return StopReason.BUDGET_EXHAUSTED, (
                f"the next request would take {counted} tokens, over the budget of "
                f"{self.budget.total}"
            )
        return None

    def _suffix(self, used: int, over_soft: bool) -> str:
        line = usage_line(used, self.budget.total)
        return f"{soft_message(self.budget)}\n\n{line}" if over_soft else line

    def _count(self) -> int:
        return self.policy.count_tokens(self.view.messages(), self.schemas)

    def _assistant_message(self, output: PolicyOutput, calls: list[ToolCall]) -> Message:
        # content is always a string: llama.cpp's server answers HTTP 500 to null (and to a
        # missing key)
        echoed = [c.model_copy(update={"arguments": arguments_json(c.arguments)}) for c in calls]
        reasoning = output.reasoning if self.config.echo_reasoning else None
        return assistant_message(output.text, echoed, reasoning)

    def _unique_ids(self, calls: list[ToolCall], turn_index: int) -> list[ToolCall]:
        """Give calls with a missing or repeated id a fresh one (ids pair calls with results)."""
        fixed = []
        for i, call in enumerate(calls):
            call_id = call.id
            if not call_id or call_id in self.call_ids:
                call_id = f"call_{turn_index}_{i}"
                while call_id in self.call_ids:
                    call_id += "x"
            self.call_ids.add(call_id)
            fixed.append(call if call_id == call.id else call.model_copy(update={"id": call_id}))
        return fixed

    def _record(self, turn: Turn, started: float) -> None:
        total = perf_counter() - started
        turn.timings.harness_s = max(total - turn.timings.policy_s - turn.timings.tools_s, 0.0)
        self.record.turns.append(turn)
        self.writer.turn(turn)

    def _finish(self, reason: StopReason, error: str | None) -> None:
        self.record.stop_reason = reason
        self.record.error = error
        self.record.wall_time_s = perf_counter() - self.started
        self.writer.end(self.record)


def _untrusted(output: PolicyOutput) -> PolicyOutput:
    """``output`` made safe to write and to send back: lone surrogates become U+FFFD, also
    those that tool-call arguments spell as JSON escapes (``"\\ud800"``)."""
    dumped = json.dumps(output.model_dump(mode="json"), ensure_ascii=False)
    clean = safe_text(dumped)
    if clean != dumped:
        output = PolicyOutput.model_validate_json(clean)
    calls = [
        c.model_copy(update={"arguments": _safe_arguments(c.arguments)}) for c in output.tool_calls
    ]
    return output.model_copy(update={"tool_calls": calls})


def _safe_arguments(raw: str) -> str:
    """Raw JSON arguments whose decoded strings hold no lone surrogate."""
    if "\\u" not in raw:
        return raw
    try:
        decoded = json.dumps(json.loads(raw), ensure_ascii=False)
    except (ValueError, RecursionError):  # broken JSON: the parser reports it to the policy
        return raw
    clean = safe_text(decoded)
    return raw if clean == decoded else clean


def _event(call: ToolCall, parsed: ParsedCall | str) -> ToolEvent:
    valid = isinstance(parsed, ParsedCall)
    return ToolEvent(
        call_id=call.id,
        name=call.name,
        raw_arguments=call.arguments,
        arguments=parsed.args if isinstance(parsed, ParsedCall) else None,
        status=CallStatus.OK if valid else CallStatus.INVALID,
    )


def _settings(config: HarnessConfig, policy: Policy) -> dict[str, Any]:
    settings: dict[str, Any] = {"harness": asdict(config) | {"tools": list(config.tools)}}
    policy_settings = getattr(policy, "settings", None)
    if isinstance(policy_settings, dict):
        settings["policy"] = policy_settings
    return settings
