"""End to end through the real ``openai`` client and a local OpenAI-compatible server.

Every check reads the request bodies the server actually received.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.trajectory import CallStatus, StopReason, load_trajectory
from sleuth.policies import OpenAIChatPolicy
from sleuth.tools.spec import ORIGINAL_TOOLS, TOOL_SCHEMAS
from sleuth.tools.types import render_chunk
from tests.fakes import FakeTools
from tests.openai_stub import StubServer, assistant, tool_call

HEADER = re.compile(r"# DOCUMENT ID: (\S+)")
USAGE = re.compile(r"\[Token usage: (\d+)/(\d+)\]$")
ANSWER = assistant(
    content='<Document id="d2"><Justification>It holds the fact.</Justification></Document>'
)


def shown(body: dict) -> list[str]:
    return [
        i for m in body["messages"] if m["role"] == "tool" for i in HEADER.findall(m["content"])
    ]


def policy(server: StubServer, **kwargs) -> OpenAIChatPolicy:
    return OpenAIChatPolicy("stub-model", base_url=server.base_url, max_retries=1, **kwargs)


def without(text: str, blocks: list[str]) -> str:
    """``text`` with the given chunk blocks and the separators around them removed."""
    for block in blocks:
        text = text.replace(block, "")
    text = text.replace("All chunks of this result were pruned.", "")
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def test_prune_usage_and_dedup_over_http(tmp_path):
    def prune_two(body, index):
        victims = shown(body)[:2]
        return assistant(
            tool_call("prune_chunks", "p1", chunk_ids=[*victims, "nope_1"]),
            tool_call("search_corpus", "s3", query="gamma"),
        )

    script = [
        assistant(
            tool_call("search_corpus", "s1", query="alpha"),
            tool_call("search_corpus", "s2", query="beta"),
            tool_call("grep_corpus", "g1", pattern="d3_"),
        ),
        prune_two,
        ANSWER,
    ]
    tools = FakeTools()
    with StubServer(script) as server:
        chat = policy(server)
        path = tmp_path / "run.jsonl"
        trajectory = Harness(tools, chat).run("Which document?", path)
    requests = server.requests
    assert trajectory.stop_reason == StopReason.ANSWERED and len(requests) == 3
    assert all(r["tools"] == TOOL_SCHEMAS and r["parallel_tool_calls"] is True for r in requests)
    assert requests[0]["messages"][1]["content"] == "<query>Which document?</query>"

    # usage line: present after every turn and equal to the policy's own count of the request
    for body in requests[1:]:
        used, total = USAGE.search(body["messages"][-1]["content"]).groups()
        assert int(total) == 32768
        assert int(used) == chat.count_tokens(body["messages"], body["tools"])

    # pruning: the pruned chunks' text is gone from every later request; nothing else changed
    prune_event = trajectory.turns[1].tool_events[0].prune
    assert len(prune_event.pruned) == 2 and prune_event.unknown == ["nope_1"]
    blocks = [render_chunk(tools.chunks[i]) for i in prune_event.pruned]
    assert all(any(b in m["content"] for m in requests[1]["messages"][3:]) for b in blocks)
    later = json.dumps(requests[2])
    for i in prune_event.pruned:
        assert tools.chunks[i].text not in later
        assert f"DOCUMENT ID: {i} " not in later
    before, after = requests[1]["messages"], requests[2]["messages"][: len(requests[1]["messages"])]
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in old.items() if k != "content"} == {
            k: v for k, v in new.items() if k != "content"
        }
        assert without(old["content"] or "", blocks) == without(new["content"] or "", blocks)

    # dedup: no chunk shown twice across searches; later searches excluded what was shown
    final_ids = shown(requests[2]) + prune_event.pruned
    assert len(final_ids) == len(set(final_ids))
    third = next(m for m in requests[2]["messages"] if m.get("tool_call_id") == "s3")
    third_ids = HEADER.findall(third["content"])
    assert third_ids and not set(third_ids) & set(shown(requests[1]))
    third_search = [c for c in tools.calls if c[1] == "gamma"][0]
    assert set(shown(requests[1])) <= third_search[2]["exclude"]
    assert load_trajectory(path) == trajectory


def test_hard_cutoff_over_http():
    budget = BudgetConfig(total=6000, soft_threshold=1500, hard_cutoff=2000, reply_reserve=500)
    script = [
        assistant(*(tool_call("search_corpus", f"s{i}", query=f"q{i}") for i in range(4))),
        assistant(
            tool_call("search_corpus", "late", query="late"),
            tool_call("read_document", "r", doc_id="d1"),
        ),
        lambda body, i: assistant(tool_call("prune_chunks", "p", chunk_ids=shown(body))),
        ANSWER,
    ]
    tools = FakeTools(words=120)
    with StubServer(script) as server:
        # the original four tools: the prompt that explains describe_corpus and filters is
        # ~200 tokens longer, and this budget is sized to the four-tool prompt
        config = HarnessConfig(budget=budget, tools=ORIGINAL_TOOLS)
        trajectory = Harness(tools, policy(server), config).run("q")
    requests = server.requests
    assert int(USAGE.search(requests[1]["messages"][-1]["content"]).group(1)) > 2000
    refused = [m["content"] for m in requests[2]["messages"][-2:]]
    assert all(c.startswith("Error: Token budget exceeded") for c in refused)
    assert [c[1] for c in tools.calls] == ["q0", "q1", "q2", "q3"]  # refused calls never ran
    after_prune = int(USAGE.search(requests[3]["messages"][-1]["content"]).group(1))
    assert after_prune < 2000 and shown(requests[3]) == []
    assert trajectory.stop_reason == StopReason.ANSWERED


def test_parallel_calls_run_concurrently_over_http():
    script = [
        assistant(*(tool_call("search_corpus", f"s{i}", query=f"q{i}") for i in range(4))),
        ANSWER,
    ]
    with StubServer(script) as server:
        started = time.perf_counter()
        trajectory = Harness(FakeTools(delay_s=0.3), policy(server)).run("q")
        wall = time.perf_counter() - started
    assert trajectory.turns[0].timings.tools_s < 0.8  # sequential: 1.2 s
    assert wall < 1.2
    contents = [m["content"] for m in server.requests[1]["messages"][3:]]
    ids = [m["tool_call_id"] for m in server.requests[1]["messages"][3:]]
    assert ids == ["s0", "s1", "s2", "s3"] and all(HEADER.search(c) for c in contents)


def test_malformed_call_does_not_end_the_run():
    broken = assistant(
        {
            "id": "b",
            "type": "function",
            "function": {"name": "search_corpus", "arguments": "{oops"},
        },
        tool_call("teleport", "t", where="home"),
        tool_call("prune_chunks", "p", chunk_ids=42),
    )
    with StubServer([broken, ANSWER]) as server:
        trajectory = Harness(FakeTools(), policy(server)).run("q")
    assert trajectory.stop_reason == StopReason.ANSWERED
    assert [e.status for e in trajectory.turns[0].tool_events] == [CallStatus.INVALID] * 3
    sent = server.requests[1]["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert [m["content"][:6] for m in sent[3:]] == ["Error:"] * 3


def test_endpoint_errors_retry_then_fail_cleanly(tmp_path):
    script = [503, assistant(tool_call("search_corpus", "s", query="x")), 500, 500]
    with StubServer(script) as server:
        chat = OpenAIChatPolicy("m", base_url=server.base_url, max_retries=1)
        path = tmp_path / "t.jsonl"
        trajectory = Harness(FakeTools(), chat).run("q", path)
    assert len(server.requests) == 4  # 503 retried and passed; two 500s exhaust the retry
    assert trajectory.stop_reason == StopReason.POLICY_ERROR
    assert "InternalServerError" in trajectory.error
    loaded = load_trajectory(path)
    assert len(loaded.turns) == 2 and loaded.turns[0].output.tool_calls


def test_reasoning_logprobs_and_token_ids_are_kept():
    reply = {
        "message": {
            "role": "assistant",
            "content": "done",
            "reasoning_content": "thinking about it",
        },
        "logprobs": {
            "content": [
                {"token": "do", "logprob": -0.5, "bytes": None, "top_logprobs": []},
                {"token": "ne", "logprob": -0.25, "bytes": None, "top_logprobs": []},
            ]
        },
        "token_ids": [11, 12],
    }
    with StubServer([reply]) as server:
        chat = policy(server, logprobs=True, temperature=0.7)
        out = chat.generate([{"role": "user", "content": "hi"}], TOOL_SCHEMAS, 64)
    body = server.requests[0]
    assert body["logprobs"] is True and body["temperature"] == 0.7 and body["max_tokens"] == 64
    assert out.text == "done" and out.reasoning == "thinking about it"
    assert out.logprobs == [-0.5, -0.25] and out.token_ids == [11, 12]
    assert out.usage["completion_tokens"] == 5


def test_client_errors_are_not_retried():
    with StubServer([400, ANSWER]) as server, pytest.raises(Exception, match="400"):
        policy(server).generate([{"role": "user", "content": "x"}], TOOL_SCHEMAS, 8)
    assert len(server.requests) == 1
