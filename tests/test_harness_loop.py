"""The loop with a scripted policy and an in-memory toolbox: dedup, budget, robustness,
concurrency and the trajectory record."""

from __future__ import annotations

import json
import re

import pytest

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.policy import PolicyOutput, ToolCall
from sleuth.harness.run import run_query
from sleuth.harness.trajectory import CallStatus, StopReason, load_trajectory
from sleuth.policies import ScriptedPolicy, call, turn
from sleuth.tools.types import ChunkHit, ToolResult
from tests.fakes import FakeTools

ANSWER = '<Document id="d1"><Justification>It names the thing.</Justification></Document>'
HEADER = re.compile(r"# DOCUMENT ID: (\S+)")


def ids_in(message: dict) -> list[str]:
    return HEADER.findall(message.get("content") or "")


def run(script, tools=None, config=None, path=None, query="which river?"):
    policy = ScriptedPolicy(script)
    trajectory = Harness(tools or FakeTools(), policy, config or HarnessConfig()).run(query, path)
    return trajectory, policy


def test_dedup_across_and_within_turns():
    tools = FakeTools()
    trajectory, policy = run(
        [
            turn(call("search_corpus", query="nile"), call("search_corpus", query="nile")),
            turn(call("search_corpus", query="nile"), call("grep_corpus", pattern="chunk")),
            ANSWER,
        ],
        tools,
    )
    first, second = trajectory.turns[0].tool_events
    assert first.shown_ids and second.shown_ids == []  # same query in one turn: shown once
    assert second.dropped_ids == first.shown_ids
    assert "already shown" in second.observation
    shown_turn0 = set(first.shown_ids)
    search2, grep2 = tools.calls[2], tools.calls[3]
    assert search2[2]["exclude"] == shown_turn0 and grep2[2]["exclude"] == shown_turn0
    all_shown = [i for e in trajectory.tool_events() for i in e.shown_ids]
    assert len(all_shown) == len(set(all_shown))  # no chunk shown twice in the run


def test_read_document_gets_the_query_that_surfaced_it():
    tools = FakeTools()
    trajectory, _ = run(
        [
            turn(call("search_corpus", query="first")),
            lambda m: turn(
                call("search_corpus", query="second"),
                call("read_document", doc_id=ids_in(m[-1])[0]),  # a chunk id works too
                call("read_document", doc_id="d11"),
            ),
            ANSWER,
        ],
        tools,
    )
    events = trajectory.turns[1].tool_events
    surfaced = {e.shown_ids[0].rsplit("_", 1)[0] for e in trajectory.turns[0].tool_events}
    assert events[1].read_query == "first" and surfaced
    assert events[2].read_query in {"first", "which river?"}
    reads = [c for c in tools.calls if c[0] == "read_document"]
    assert reads[0][2]["query"] == "first"


def test_final_answer_and_summary(tmp_path):
    path = tmp_path / "t.jsonl"
    trajectory, policy = run([turn(call("search_corpus", query="x")), ANSWER], path=path)
    assert trajectory.stop_reason == StopReason.ANSWERED
    summary = trajectory.summary()
    assert summary.final_doc_ids == ["d1"] and summary.turns == 2 and summary.tool_calls == 1
    assert summary.peak_tokens == trajectory.turns[1].prompt_tokens
    assert set(summary.seen_chunks) == set(trajectory.turns[0].tool_events[0].shown_ids)
    assert load_trajectory(path) == trajectory
    kinds = [json.loads(line)["kind"] for line in path.read_text().splitlines()]
    assert kinds == ["header", "turn", "turn", "end"]
    assert trajectory.turns[0].messages == policy.requests[0]  # exact messages recorded
    assert policy.remaining == 0
    assert policy.max_tokens == [32_768 - t.prompt_tokens for t in trajectory.turns]


def test_robust_to_bad_calls_and_failing_tools():
    class Exploding(FakeTools):
        def grep_corpus(self, pattern, exclude=(), max_tokens=None):
            raise RuntimeError("disk on fire")

    broken = PolicyOutput(
        tool_calls=[
            ToolCall(id="a", name="search_corpus", arguments='{"query": '),
            ToolCall(id="a", name="fly", arguments="{}"),  # duplicate id, unknown tool
            ToolCall(id="", name="search_corpus", arguments='{"query": 7}'),
            ToolCall(id="d", name="grep_corpus", arguments='{"pattern": "x"}'),
            ToolCall(id="e", name="read_document", arguments='{"doc_id": "nope"}'),
        ]
    )
    trajectory, policy = run([broken, ANSWER], Exploding())
    assert trajectory.stop_reason == StopReason.ANSWERED
    statuses = [e.status for e in trajectory.turns[0].tool_events]
    assert statuses == [CallStatus.INVALID] * 3 + [CallStatus.TOOL_ERROR] * 2
    sent = policy.requests[1]
    call_ids = [c["id"] for c in sent[2]["tool_calls"]]
    assert len(set(call_ids)) == 5 and [m["tool_call_id"] for m in sent[3:]] == call_ids
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    texts = [m["content"] for m in sent[3:]]
    assert "not valid JSON" in texts[0] and "Unknown tool 'fly'" in texts[1]
    assert "disk on fire" in texts[3] and "unknown document" in texts[4]


def test_policy_error_is_recorded(tmp_path):
    def failing(messages, index):
        if index == 1:
            raise ConnectionError("endpoint down")
        return turn(call("search_corpus", query="x"))

    path = tmp_path / "t.jsonl"
    trajectory, _ = run(failing, path=path)
    assert trajectory.stop_reason == StopReason.POLICY_ERROR
    assert "endpoint down" in trajectory.error and trajectory.turns[1].error
    assert load_trajectory(path).stop_reason == StopReason.POLICY_ERROR
    assert trajectory.summary().error


def test_interrupt_keeps_what_was_written(tmp_path):
    def interrupted(messages, index):
        if index == 2:
            raise KeyboardInterrupt
        return turn(call("search_corpus", query=f"q{index}"))

    path = tmp_path / "t.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run(interrupted, path=path)
    loaded = load_trajectory(path)
    assert len(loaded.turns) == 2 and loaded.stop_reason == StopReason.INTERRUPTED
    with path.open("a") as f:  # a torn line from a crash mid-write is skipped
        f.write('{"kind": "turn", "sche')
    assert len(load_trajectory(path).turns) == 2


def test_blank_reply_gets_a_nudge_then_is_malformed():
    blank = PolicyOutput(text="", reasoning="probably d3_1")
    trajectory, policy = run([turn(call("grep_corpus", pattern="d3_1")), blank, blank])
    assert "reply was empty" in policy.requests[2][-1]["content"]
    assert trajectory.stop_reason == StopReason.MALFORMED_ANSWER
    assert trajectory.answer.doc_ids == ["d3"] and trajectory.answer.malformed


def test_max_turns():
    config = HarnessConfig(budget=BudgetConfig(max_turns=3))
    trajectory, _ = run(lambda m, i: turn(call("search_corpus", query=f"q{i}")), config=config)
    assert trajectory.stop_reason == StopReason.MAX_TURNS and len(trajectory.turns) == 3
    assert trajectory.answer is None and "max_turns" in trajectory.summary().error


def test_hard_cutoff_refuses_all_but_prune():
    budget = BudgetConfig(total=6000, soft_threshold=1500, hard_cutoff=2000, reply_reserve=500)
    tools = FakeTools(words=120)
    search4 = turn(*(call("search_corpus", query=f"q{i}") for i in range(4)))
    trajectory, policy = run(
        [
            search4,
            turn(call("search_corpus", query="more"), call("grep_corpus", pattern="d")),
            lambda m: turn(
                call("prune_chunks", chunk_ids=[i for msg in m for i in ids_in(msg)]),
                call("search_corpus", query="after prune"),
            ),
            ANSWER,
        ],
        tools,
        HarnessConfig(budget=budget),
    )
    t0, t1, t2 = trajectory.turns[:3]
    assert t0.usage_after > budget.hard and t0.over_soft
    assert "prune_chunks" in policy.requests[1][-1]["content"]  # the soft message
    assert t1.over_hard
    assert [e.status for e in t1.tool_events] == [CallStatus.REJECTED] * 2
    assert all("Token budget exceeded" in m["content"] for m in policy.requests[2][-2:])
    assert [c[1] for c in tools.calls][4:] == ["after prune"]  # refused calls never ran
    assert not t2.over_hard and t2.tool_events[1].status == CallStatus.OK  # prune freed room


def test_outputs_are_cut_to_fit_and_usage_never_exceeds_total():
    class Greedy(FakeTools):  # ignores max_tokens: the harness must still fit the budget
        def search_corpus(self, query, exclude=(), max_tokens=None):
            start = 0 if query == "a" else 18
            chunks = [c for c in self.chunks.values() if c.id not in exclude][start : start + 18]
            return ToolResult(tool="search_corpus", chunks=chunks)

    budget = BudgetConfig(total=4000, reply_reserve=300, per_call_tokens=1000)
    trajectory, policy = run(
        [turn(call("search_corpus", query="a"), call("search_corpus", query="b")), ANSWER],
        Greedy(words=60),
        HarnessConfig(budget=budget),
    )
    t0 = trajectory.turns[0]
    assert t0.usage_after <= budget.observation_limit
    assert sum(e.max_tokens for e in t0.tool_events) <= t0.allowance
    assert t0.tool_events[-1].dropped_ids and "left out to fit" in t0.tool_events[-1].observation
    sent = policy.requests[1]
    assert policy.count_tokens(sent, trajectory.tool_schemas) == t0.usage_after
    assert sent[-1]["content"].endswith(f"[Token usage: {t0.usage_after}/4000]")


def test_budget_exhausted_by_a_huge_reply():
    budget = BudgetConfig(total=3000, reply_reserve=300)
    huge = turn(call("search_corpus", query="x"), text="blah " * 3000)
    trajectory, _ = run([huge, ANSWER], config=HarnessConfig(budget=budget))
    assert trajectory.stop_reason == StopReason.BUDGET_EXHAUSTED


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_calls_overlap(parallel):
    tools = FakeTools(delay_s=0.3)
    search4 = turn(*(call("search_corpus", query=f"q{i}") for i in range(4)))
    trajectory, _ = run([search4, ANSWER], tools, HarnessConfig(parallel_tools=parallel))
    tools_s = trajectory.turns[0].timings.tools_s
    if parallel:
        assert tools_s < 0.8  # 4 x 0.3 s sequentially
    else:
        assert tools_s >= 1.2
    events = trajectory.turns[0].tool_events
    assert [e.arguments["query"] for e in events] == ["q0", "q1", "q2", "q3"]  # call order


def test_tool_time_limit():
    class Slow(FakeTools):
        def grep_corpus(self, pattern, exclude=(), max_tokens=None):
            import time

            time.sleep(1.0)
            return ToolResult(
                tool="grep_corpus", chunks=[ChunkHit(id="x_0", doc_id="x", text="t", tokens=1)]
            )

    config = HarnessConfig(tool_timeout_s=0.2)
    trajectory, _ = run(
        [turn(call("grep_corpus", pattern="a"), call("search_corpus", query="b")), ANSWER],
        Slow(),
        config,
    )
    grep, search = trajectory.turns[0].tool_events
    assert grep.status == CallStatus.TOOL_ERROR and "did not answer" in grep.observation
    assert search.status == CallStatus.OK


def test_run_query_matches_the_cli_json_shape(tmp_path):
    two = (
        '<Document id="d1_0"><Justification>A.</Justification></Document>'
        '<Document id="d1_2"><Justification>B.</Justification></Document>'
        '<Document id="d4"><Justification>C.</Justification></Document>'
    )
    policy = ScriptedPolicy([turn(call("search_corpus", query="x")), two])
    path = tmp_path / "r.jsonl"
    out = run_query(FakeTools(), "q", policy=policy, budget=8000, trajectory=path)
    assert out["documents"] == [
        {"id": "d1", "rank": 1, "justification": "A."},
        {"id": "d4", "rank": 2, "justification": "C."},
    ]
    assert (out["trajectory"], out["turns"], out["tool_calls"]) == (str(path), 2, 1)
    assert out["peak_tokens"] > 0 and out["stop_reason"] == "answered"
    assert load_trajectory(path).settings["harness"]["budget"]["hard_cutoff"] == 6000


def test_reasoning_is_recorded_and_echoed_only_when_asked():
    thought = PolicyOutput(
        reasoning="look for rivers", tool_calls=[call("search_corpus", query="x")]
    )
    for echo in (False, True):
        trajectory, policy = run([thought, ANSWER], config=HarnessConfig(echo_reasoning=echo))
        assert trajectory.turns[0].output.reasoning == "look for rivers"
        assert ("reasoning_content" in policy.requests[1][2]) is echo
