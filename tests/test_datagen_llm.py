"""The record/replay LLM layer against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time

import pytest

from sleuth.datagen.pipeline.llm import (
    CacheMissError,
    ChatLLM,
    LLMConfig,
    LLMError,
    RateLimiter,
    request_key,
)
from sleuth.errors import InputError
from tests.openai_stub import answering_server, call, reply

MESSAGES = [{"role": "user", "content": "Which tool?"}]
TOOLS = [{"type": "function", "function": {"name": "search_corpus", "parameters": {}}}]


@pytest.fixture
def server():
    with answering_server(lambda body: reply("thinking", [call("search_corpus", query="q")])) as s:
        yield s


def _llm(tmp_path, server=None, **overrides) -> ChatLLM:
    settings = {
        "model": "scripted",
        "base_url": server.base_url if server else "http://127.0.0.1:9/v1",
        "cache_dir": tmp_path / "cache",
        "backoff_s": 0.01,
    }
    return ChatLLM(LLMConfig(**(settings | overrides)), tmp_path / "run")


def forbid_network(monkeypatch) -> None:
    """From now on, any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_recorded_response_replays_identically_without_network(tmp_path, server, monkeypatch):
    recorded = _llm(tmp_path, server, mode="record").complete(
        MESSAGES, stage="explore", tools=TOOLS, temperature=0.0
    )
    assert recorded.tool_calls[0].name == "search_corpus"
    assert len(server.requests) == 1
    server.stop()
    forbid_network(monkeypatch)
    replayed = _llm(tmp_path, mode="replay").complete(
        MESSAGES, stage="explore", tools=TOOLS, temperature=0.0
    )
    assert replayed.replayed and not recorded.replayed
    assert replayed.model_dump(exclude={"replayed"}) == recorded.model_dump(exclude={"replayed"})
    assert replayed.assistant_message() == recorded.assistant_message()


def test_replay_miss_is_a_clear_error_and_never_calls(tmp_path, server, monkeypatch):
    forbid_network(monkeypatch)
    with pytest.raises(CacheMissError, match="stage verify: request .* is not in the cache"):
        _llm(tmp_path, mode="replay").complete(MESSAGES, stage="verify")
    assert server.requests == []


def test_auto_mode_calls_once_then_serves_the_cache(tmp_path, server):
    llm = _llm(tmp_path, server, mode="auto")
    first = llm.complete(MESSAGES, stage="explore")
    second = llm.complete(MESSAGES, stage="explore")
    assert len(server.requests) == 1
    assert second.replayed and second.content == first.content
    # a different draw of the same prompt is a different request
    llm.complete(MESSAGES, stage="explore", sample=1)
    assert len(server.requests) == 2


def test_key_depends_on_every_part_of_the_request():
    base = request_key("m", MESSAGES, TOOLS, {"temperature": 0})
    assert base == request_key("m", [dict(MESSAGES[0])], TOOLS, {"temperature": 0})
    assert base != request_key("m2", MESSAGES, TOOLS, {"temperature": 0})
    assert base != request_key("m", MESSAGES, None, {"temperature": 0})
    assert base != request_key("m", MESSAGES, TOOLS, {"temperature": 1})
    assert base != request_key("m", MESSAGES + MESSAGES, TOOLS, {"temperature": 0})


def test_server_errors_are_retried_with_backoff(tmp_path):
    statuses = [500, 503]

    def flaky(body):
        return statuses.pop(0) if statuses else reply("ok")

    with answering_server(flaky) as s:
        result = _llm(tmp_path, s, mode="record").complete(MESSAGES, stage="explore")
        assert result.content == "ok" and len(s.requests) == 3


def test_gives_up_after_max_retries_and_does_not_retry_client_errors(tmp_path):
    with answering_server(lambda body: 502) as s:
        with pytest.raises(LLMError, match="gave up after 2 tries"):
            _llm(tmp_path, s, mode="record", max_retries=1).complete(MESSAGES, stage="x")
        assert len(s.requests) == 2
    with answering_server(lambda body: 400) as s:
        with pytest.raises(LLMError, match="rejected \\(400\\)"):
            _llm(tmp_path, s, mode="record").complete(MESSAGES, stage="x")
        assert len(s.requests) == 1


def test_connection_errors_are_retried(tmp_path):
    llm = _llm(tmp_path, None, mode="record", max_retries=2, timeout_s=2)
    started = time.monotonic()
    with pytest.raises(LLMError, match="gave up after 3 tries"):
        llm.complete(MESSAGES, stage="x")
    assert time.monotonic() - started >= 0.01 + 0.02  # two backoff sleeps


def test_ledger_counts_tokens_and_cost_per_stage(tmp_path, server):
    prices = {"price_prompt_per_1k": 2.0, "price_completion_per_1k": 10.0}
    llm = _llm(tmp_path, server, mode="auto", **prices)
    live = llm.complete(MESSAGES, stage="explore")
    llm.complete(MESSAGES, stage="explore")  # replayed: tokens counted, no cost
    llm.complete(MESSAGES, stage="verify", sample=3)
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())["stages"]
    explore = ledger["explore"]
    assert (explore["calls"], explore["live_calls"], explore["replayed_calls"]) == (2, 1, 1)
    assert explore["prompt_tokens"] == 2 * live.usage.prompt_tokens > 0
    expected = (live.usage.prompt_tokens * 2.0 + live.usage.completion_tokens * 10.0) / 1000
    assert explore["cost_usd"] == pytest.approx(expected)
    assert ledger["verify"]["live_calls"] == 1
    # a resumed run adds to the same ledger
    _llm(tmp_path, server, mode="auto", **prices).complete(MESSAGES, stage="explore")
    again = json.loads((tmp_path / "run" / "ledger.json").read_text())["stages"]["explore"]
    assert again["calls"] == 3


def test_rate_limiter_spaces_request_starts():
    limiter = RateLimiter(50.0)
    started = time.monotonic()
    for _ in range(6):
        limiter.wait()
    assert time.monotonic() - started >= 5 / 50 - 0.005


def test_cache_requires_a_directory_unless_recording():
    with pytest.raises(InputError, match="needs a cache directory"):
        LLMConfig(model="m", mode="replay")
    assert LLMConfig(model="m", mode="record").cache_dir is None
