"""A fuzzed chat endpoint: whatever a model server returns, every run ends with a written,
parseable trajectory whose stop reason says what happened.

A seeded generator plays over a thousand replies from a real HTTP server on 127.0.0.1 to the
``openai`` client sleuth's policies use (:func:`sleuth.policies.http.openai_client`): good tool
calls and answers mixed with empty or missing ``choices``, null messages, HTTP 429/500/503,
non-JSON and truncated bodies, truncated, enormous or deeply nested arguments, unknown tools,
duplicate call ids and lone surrogates. The harness runs over a real index (Chroma, bm25s).
Runs go one after another, so each run's replies are known.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.responses import JSONResponse, Response

from sleuth.corpus.models import Document
from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.harness.trajectory import StopReason, load_trajectory
from sleuth.index import Index
from sleuth.io import read_jsonl
from sleuth.policies import OpenAIChatPolicy
from sleuth.policies.http import openai_client
from sleuth.tools.toolbox import Toolbox
from tests.openai_stub import StubServer, _completion, assistant, tool_call

SEED = 13
MIN_OUTPUTS = 1000
MAX_TURNS = 6
RETRIES = 1  # a transient failure is tried twice; the server asks for a 1 ms wait
FAST_RETRY = {"retry-after-ms": "1"}
DOCS = [
    Document(id="nile", text="The Nile is a river in Africa. It flows north through Egypt."),
    Document(id="amazon", text="The Amazon river in South America carries the most water."),
    Document(id="cairo", text="Cairo, the capital of Egypt, lies on the banks of the Nile."),
    Document(id="alps", text="The Alps are a mountain range in Europe with glaciers."),
]
WORDS = ["river", "Egypt", "Nile", "glacier", "capital", "Amazon", "\u00e9t\u00e9", "\U0001f30a"]

# How a run that ends on a reply of each kind may stop.
FATAL = frozenset({StopReason.POLICY_ERROR})  # the policy call failed
FINAL = frozenset({StopReason.ANSWERED, StopReason.MALFORMED_ANSWER})  # no tool calls
GOES_ON = frozenset({StopReason.MAX_TURNS, StopReason.BUDGET_EXHAUSTED})  # tool calls
BLANK = FINAL | GOES_ON  # nudged while nudges are left, else a malformed answer


@dataclass(frozen=True)
class Kind:
    name: str
    stops: frozenset[StopReason]
    weight: int
    make: Callable[[random.Random], Any]


def _text(rng: random.Random, n: int = 4) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _raw(body: bytes | str, status: int = 200, media: str = "application/json") -> Response:
    return Response(body, status_code=status, media_type=media, headers=FAST_RETRY)


def _status(code: int) -> Callable[[random.Random], Response]:
    error = {"error": {"message": f"fuzzed status {code}", "type": "fuzz"}}
    return lambda rng: JSONResponse(error, status_code=code, headers=FAST_RETRY)


def _completion_with(**fields: Any) -> Callable[[random.Random], Response]:
    def make(rng: random.Random) -> Response:
        body = _completion(assistant(content=_text(rng)), "fuzz") | fields
        return JSONResponse(body)

    return make


def _search(rng: random.Random) -> dict[str, Any]:
    return assistant(tool_call("search_corpus", f"s{rng.randrange(4)}", query=_text(rng)))


def _parallel(rng: random.Random) -> dict[str, Any]:
    calls = [
        tool_call("search_corpus", "a", query=_text(rng)),
        tool_call("grep_corpus", "b", pattern=rng.choice(["Nile", "(unclosed", r"\bthe\b"])),
        tool_call("read_document", "c", doc_id=rng.choice(["cairo", "atlantis", "alps"])),
        tool_call("prune_chunks", "d", chunk_ids=[rng.choice(["nile_0", "cairo_0", "x_9"])]),
    ]
    return assistant(*rng.sample(calls, rng.randint(2, 4)))


def _call(name: str, arguments: Any, call_id: Any = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _answer(rng: random.Random) -> dict[str, Any]:
    docs = rng.sample([d.id for d in DOCS] + ["atlantis"], rng.randint(1, 3))
    body = "".join(
        f'<Document id="{d}"><Justification>{_text(rng)}</Justification></Document>' for d in docs
    )
    return assistant(content=body)


def _truncated_body(rng: random.Random) -> Response:
    text = json.dumps(_completion(_search(rng), "fuzz"))
    return _raw(text[: rng.randrange(1, len(text) - 1)])


KINDS = [
    Kind("search", GOES_ON, 14, _search),
    Kind("parallel calls", GOES_ON, 10, _parallel),
    Kind("answer", FINAL, 6, _answer),
    Kind("prose answer", FINAL, 3, lambda rng: assistant(content=_text(rng, 12))),
    Kind("blank reply", BLANK, 3, lambda rng: assistant(content=rng.choice([None, "", "  \n"]))),
    Kind(
        "lone surrogate in text",
        FINAL,
        3,
        lambda rng: assistant(content=f"{_text(rng)}\ud800"),
    ),
    Kind(
        "lone surrogate in an answer",
        FINAL,
        2,
        lambda rng: assistant(
            content='<Document id="nile\udfff"><Justification>\ud83d x</Justification></Document>'
        ),
    ),
    Kind(
        "lone surrogate in reasoning",
        GOES_ON,
        2,
        lambda rng: {"message": _search(rng) | {"reasoning_content": "thinking \udc80 it"}},
    ),
    Kind(
        "lone surrogate in arguments",
        GOES_ON,
        3,
        lambda rng: assistant(_call("search_corpus", '{"query": "Nile \\ud800 river"}')),
    ),
    Kind(
        "truncated arguments",
        GOES_ON,
        3,
        lambda rng: assistant(_call("search_corpus", '{"query": "Nile ri')),
    ),
    Kind(
        "enormous arguments",
        GOES_ON,
        1,
        lambda rng: assistant(tool_call("search_corpus", "big", query="Nile " * 200_000)),
    ),
    Kind(
        "deeply nested arguments",
        GOES_ON,
        1,
        lambda rng: assistant(_call("search_corpus", "[" * 100_000 + "]" * 100_000)),
    ),
    Kind(
        "arguments as an object",
        GOES_ON,
        2,
        lambda rng: assistant(_call("read_document", {"doc_id": "cairo"})),
    ),
    Kind("wrong argument types", GOES_ON, 2, lambda rng: assistant(_call("grep_corpus", "[1, 2]"))),
    Kind("unknown tool", GOES_ON, 2, lambda rng: assistant(_call("delete_corpus", "{}"))),
    Kind(
        "duplicate call ids",
        GOES_ON,
        3,
        lambda rng: assistant(
            tool_call("search_corpus", "same", query=_text(rng)),
            tool_call("grep_corpus", "same", pattern="Egypt"),
        ),
    ),
    Kind(
        "null function",
        GOES_ON,
        2,
        lambda rng: assistant({"id": None, "type": "function", "function": None}),
    ),
    Kind(
        "cut off by length",
        FINAL,
        2,
        lambda rng: {"message": assistant(content='<Document id="ni'), "finish_reason": "length"},
    ),
    Kind("HTTP 429", FATAL, 3, _status(429)),
    Kind("HTTP 500", FATAL, 3, _status(500)),
    Kind("HTTP 503", FATAL, 3, _status(503)),
    Kind("HTTP 400", FATAL, 1, _status(400)),
    Kind("non-JSON body", FATAL, 2, lambda rng: _raw("upstream timed out", 200, "text/plain")),
    Kind(
        "HTML error page", FATAL, 1, lambda rng: _raw("<html>Bad Gateway</html>", 502, "text/html")
    ),
    Kind("truncated JSON body", FATAL, 2, _truncated_body),
    Kind("empty body", FATAL, 1, lambda rng: _raw(b"")),
    Kind("invalid UTF-8 body", FATAL, 1, lambda rng: _raw(b'{"choices": "\xed\xa0\x80\xff"}')),
    Kind("empty choices", FATAL, 2, _completion_with(choices=[])),
    Kind("missing choices", FATAL, 2, lambda rng: JSONResponse({"id": "x", "object": "chat"})),
    Kind("null choices", FATAL, 1, _completion_with(choices=None)),
    Kind(
        "null message",
        FATAL,
        2,
        _completion_with(choices=[{"index": 0, "message": None, "finish_reason": "stop"}]),
    ),
    Kind("null choice", FATAL, 1, _completion_with(choices=[None])),
    Kind("a JSON list", FATAL, 1, lambda rng: JSONResponse([1, 2, 3])),
]


class Fuzzer:
    """The server script: a seeded random reply per request, and the kind of each one."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.queries = random.Random(seed + 1)
        self.kinds: list[Kind] = []

    def __call__(self, body: dict[str, Any], index: int) -> Any:
        kind = self.rng.choices(KINDS, weights=[k.weight for k in KINDS])[0]
        self.kinds.append(kind)
        return kind.make(self.rng)


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    path = tmp_path_factory.mktemp("fuzz") / "index"
    Index.create(path, embedder="hash").ingest(DOCS)
    return Toolbox(Index.open(path))


def _check_run(path: Path, record: Any, last: Kind) -> None:
    """The file ends with its end line, loads back to the run, and the stop fits the last reply."""
    lines = list(read_jsonl(path))
    assert lines[0]["kind"] == "header" and lines[-1]["kind"] == "end"
    loaded = load_trajectory(path)
    assert loaded.model_dump(exclude={"wall_time_s"}) == record.model_dump(exclude={"wall_time_s"})
    stop, turns = loaded.stop_reason, loaded.turns
    assert stop in last.stops, (last.name, stop)
    if stop is StopReason.POLICY_ERROR:
        assert turns[-1].output is None and loaded.error and loaded.error == turns[-1].error
    elif stop in FINAL:
        assert loaded.answer is not None and loaded.error is None
        assert (stop is StopReason.MALFORMED_ANSWER) == loaded.answer.malformed
    elif stop is StopReason.MAX_TURNS:
        assert len(turns) == MAX_TURNS
    else:
        assert "budget" in (loaded.error or "")


def test_every_fuzzed_run_ends_with_a_written_trajectory(toolbox: Toolbox, tmp_path: Path):
    fuzzer = Fuzzer(SEED)
    config = HarnessConfig(budget=BudgetConfig(max_turns=MAX_TURNS), tool_timeout_s=30)
    runs = written = 0
    crashes: list[str] = []
    stops: dict[str, int] = {}
    with StubServer(fuzzer) as server:
        client = openai_client(server.base_url, "x", timeout_s=30, max_retries=RETRIES)
        while len(fuzzer.kinds) < MIN_OUTPUTS:
            path = tmp_path / f"run-{runs}.jsonl"
            runs += 1
            policy = OpenAIChatPolicy("fuzz", client=client)
            try:
                record = Harness(toolbox, policy, config).run(_text(fuzzer.queries), path)
            except Exception as exc:  # a crash: counted and reported, the fuzz goes on
                crashes.append(f"run {runs} on {fuzzer.kinds[-1].name}: {exc!r:.300}")
                continue
            written += path.is_file()
            _check_run(path, record, fuzzer.kinds[-1])
            stops[str(record.stop_reason)] = stops.get(str(record.stop_reason), 0) + 1
    print(
        f"\nfuzz: {len(fuzzer.kinds)} outputs, {runs} runs, {len(crashes)} crashes, "
        f"{written} trajectories written; stops {dict(sorted(stops.items()))}"
    )
    assert crashes == [] and written == runs
    assert set(stops) == {str(s) for s in StopReason} - {"interrupted"}
    assert {k.name for k in fuzzer.kinds} == {k.name for k in KINDS}
