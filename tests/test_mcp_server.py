"""`sleuth serve mcp` driven by the official MCP client, as a desktop client would run it.

The server runs as a subprocess (`python -m sleuth.cli serve mcp`) over a small hash-embedded
index. One client session per transport makes every call; the tests then check what came back,
so the subprocess and its imports are paid once.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from sleuth.api.agent import Agent
from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.policies.openai_chat import OpenAIChatPolicy
from sleuth.serve import policy_factory_for
from sleuth.serve.limits import MAX_REPLY_BYTES, bounded
from sleuth.serve.mcp_server import McpServerConfig, SleuthTools, http_notice
from sleuth.tools.toolbox import Toolbox

TOOL_NAMES = {
    "search_corpus",
    "grep_corpus",
    "read_document",
    "prune_chunks",
    "describe_corpus",
    "search",
}
QUESTION = "Which river flows through Egypt?"
DOCS = [
    Document(id="nile", text="The Nile is a river in Africa. It flows north through Egypt."),
    Document(id="amazon", text="The Amazon river in South America carries the most water."),
    Document(id="cairo", text="Cairo, the capital of Egypt, lies on the banks of the Nile."),
    Document(
        id="alps",
        text="The Alps are a mountain range in Europe with glaciers.",
        metadata={"continent": "Europe"},
    ),
]
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "search": ("search_corpus", {"query": "river Egypt"}),
    "search_excluding": (
        "search_corpus",
        {"query": "river Egypt", "exclude_chunk_ids": ["nile_0"]},
    ),
    "grep_bad": ("grep_corpus", {"pattern": "(unclosed"}),
    "grep": ("grep_corpus", {"pattern": r"\bglaciers?\b"}),
    "read": ("read_document", {"doc_id": "cairo"}),
    "read_unknown": ("read_document", {"doc_id": "atlantis"}),
    "prune": ("prune_chunks", {"chunk_ids": ["nile_0", "nowhere_3"]}),
    "subagent": ("search", {"query": QUESTION}),
    "subagent_blank": ("search", {"query": "  "}),
    "describe": ("describe_corpus", {}),
    "search_where": ("search_corpus", {"query": "river", "where": {"continent": "Europe"}}),
    "grep_where_unknown": ("grep_corpus", {"pattern": "river", "where": {"planet": "Mars"}}),
}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "index"
    Index.create(path, embedder="hash").ingest(DOCS)
    return path


def server_args(index_dir: Path, *extra: str) -> list[str]:
    trajectories = index_dir.parent / "runs"
    return [
        "-m",
        "sleuth.cli",
        "serve",
        "mcp",
        "--index",
        str(index_dir),
        "--policy",
        "heuristic",
        "--trajectory-dir",
        str(trajectories),
        *extra,
    ]


async def converse(session: ClientSession) -> dict[str, Any]:
    """List the tools, then make every call in CALLS."""
    await session.initialize()
    replies: dict[str, Any] = {"tools": (await session.list_tools()).tools}
    for key, (name, arguments) in CALLS.items():
        replies[key] = await session.call_tool(name, arguments)
    return replies


@pytest.fixture(scope="module")
def stdio_replies(index_dir: Path) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable, args=server_args(index_dir), env=dict(os.environ)
    )

    async def run() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await converse(session)

    return anyio.run(run)


def structured(reply: CallToolResult) -> Any:
    assert reply.structured_content is not None
    return reply.structured_content


def text(reply: CallToolResult) -> str:
    return "\n".join(block.text for block in reply.content if block.type == "text")


def test_lists_five_tools_with_input_schemas(stdio_replies):
    tools = {t.name: t for t in stdio_replies["tools"]}
    assert set(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.input_schema["type"] == "object" and tool.description
        assert tool.output_schema is not None
    assert tools["search_corpus"].input_schema["required"] == ["query"]
    assert "exclude_chunk_ids" in tools["search_corpus"].input_schema["properties"]
    assert tools["prune_chunks"].input_schema["properties"]["chunk_ids"]["type"] == "array"


def test_search_corpus_returns_index_chunks_as_text_and_spec_json(stdio_replies):
    reply = stdio_replies["search"]
    chunks = structured(reply)["result"]
    assert not reply.is_error and chunks
    assert {c["doc_id"] for c in chunks} <= {d.id for d in DOCS}
    for c in chunks:
        assert set(c) == {"id", "doc_id", "text", "tokens", "score"}
        assert f"# DOCUMENT ID: {c['id']} ({c['tokens']} tokens)" in text(reply)


def test_search_corpus_honours_exclusions(stdio_replies):
    ids = [c["id"] for c in structured(stdio_replies["search_excluding"])["result"]]
    assert ids and "nile_0" not in ids


def test_grep_with_a_bad_regex_is_an_error_result(stdio_replies):
    reply = stdio_replies["grep_bad"]
    assert reply.is_error
    assert text(reply).startswith("Error: invalid regular expression")
    [item] = structured(reply)["result"]
    assert item["error"].startswith("invalid regular expression")


def test_grep_finds_matching_chunks(stdio_replies):
    assert [c["id"] for c in structured(stdio_replies["grep"])["result"]] == ["alps_0"]


def test_read_document_returns_the_document(stdio_replies):
    reply = stdio_replies["read"]
    [chunk] = structured(reply)["result"]
    assert chunk["doc_id"] == "cairo" and chunk["text"] == DOCS[2].text
    assert DOCS[2].text in text(reply)


def test_read_unknown_document_is_an_error_result(stdio_replies):
    reply = stdio_replies["read_unknown"]
    assert reply.is_error and structured(reply)["result"] == [
        {"error": "unknown document 'atlantis'"}
    ]


def test_prune_acknowledges_known_ids_and_reports_unknown_ones(stdio_replies):
    reply = stdio_replies["prune"]
    assert structured(reply) == {"pruned": ["nile_0"], "unknown": ["nowhere_3"]}
    assert "nowhere_3" in text(reply)


def test_search_runs_the_whole_subagent(stdio_replies):
    reply = stdio_replies["subagent"]
    run = structured(reply)
    assert not reply.is_error and run["stop_reason"] == "answered" and run["error"] is None
    ranked = [d["id"] for d in run["documents"]]
    assert ranked and set(ranked) <= {d.id for d in DOCS}
    assert [d["rank"] for d in run["documents"]] == list(range(1, len(ranked) + 1))
    assert run["turns"] >= 2 and run["tool_calls"] >= 2
    assert Path(run["trajectory"]).is_file()
    assert text(reply).startswith(f"1. {ranked[0]}: ")


def test_search_with_a_blank_query_is_an_error_result(stdio_replies):
    reply = stdio_replies["subagent_blank"]
    assert reply.is_error and text(reply) == "Error: the query is empty"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the HTTP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail("the HTTP server did not start")


def start_http(index_dir: Path, *extra: str, env: dict[str, str] | None = None):
    """The HTTP server as a subprocess on a free port; returns (process, port)."""
    port = free_port()
    args = server_args(index_dir, "--http", "--port", str(port), *extra)
    proc = subprocess.Popen(
        [sys.executable, *args], stderr=subprocess.PIPE, text=True, env=env or dict(os.environ)
    )
    wait_for_port(port, proc)
    return proc, port


def stop(proc: subprocess.Popen) -> str:
    """Stop the server; its stderr."""
    proc.terminate()
    return proc.communicate(timeout=10)[1]


def test_streamable_http_on_localhost(index_dir: Path):
    proc, port = start_http(index_dir)
    url = f"http://127.0.0.1:{port}/mcp"

    async def run() -> tuple[set[str], CallToolResult, CallToolResult]:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            many = [
                f"nowhere{i}_0" for i in range(200_000)
            ]  # a 2 MB reply before replies were bounded
            pruned = await s.call_tool("prune_chunks", {"chunk_ids": ["nile_0", *many]})
            return names, await s.call_tool("search", {"query": QUESTION}), pruned

    try:
        names, reply, pruned = anyio.run(run)
        probe = httpx.get(url, timeout=5)  # a readiness probe; the SDK held GETs open forever
        stream = httpx.get(url, headers={"Accept": "text/event-stream"}, timeout=5)
    finally:
        stderr = stop(proc)
    assert names == TOOL_NAMES
    assert structured(reply)["documents"]
    assert len(pruned.model_dump_json().encode()) < MAX_REPLY_BYTES  # the client took it whole
    assert structured(pruned)["pruned"] == ["nile_0"] and structured(pruned)["unknown"]
    assert "reply cut" in structured(pruned)["note"] and "reply cut" in text(pruned)
    assert probe.status_code == 200 and probe.json()["status"] == "ready"
    assert stream.status_code == 405 and stream.headers["allow"] == "POST"
    assert f"sleuth MCP on {url}: this machine only" in stderr


BIG = "x" * 1_000_000


def test_token_guards_http_on_all_interfaces(index_dir: Path):
    """Beyond loopback: requests need the bearer token; errors never echo a megabyte back."""
    env = dict(os.environ, SLEUTH_MCP_TOKEN="s3cret")
    proc, port = start_http(index_dir, "--host", "0.0.0.0", env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}

    async def run(token: str) -> dict[str, CallToolResult]:
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with (
            client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            return {
                "read": await s.call_tool("read_document", {"doc_id": BIG}),
                "prune": await s.call_tool("prune_chunks", {"chunk_ids": ["nile_0", BIG]}),
                "grep": await s.call_tool("grep_corpus", {"pattern": "Nile"}),
            }

    try:
        anonymous = httpx.post(url, json=initialize, headers=accept, timeout=10)
        wrong = httpx.post(
            url, json=initialize, headers=accept | {"Authorization": "Bearer nope"}, timeout=10
        )
        replies = anyio.run(run, "s3cret")
        probe = httpx.get(url, timeout=5)
    finally:
        stderr = stop(proc)
    assert anonymous.status_code == wrong.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert "clients must send 'Authorization: Bearer <token>'" in stderr
    assert "s3cret" not in stderr
    assert probe.status_code == 200
    assert {c["doc_id"] for c in structured(replies["grep"])["result"]} == {"nile", "cairo"}
    for key in ("read", "prune"):
        assert replies[key].is_error and "at most 8192 characters" in text(replies[key])
        assert len(text(replies[key])) < 2_000


@pytest.mark.parametrize("extra", [(), ("--token", " ")])
def test_http_beyond_loopback_without_a_token_exits_2(index_dir: Path, extra: tuple[str, ...]):
    cmd = [sys.executable, "-m", "sleuth.cli", "serve", "mcp", "--index", str(index_dir)]
    env = {k: v for k, v in os.environ.items() if k != "SLEUTH_MCP_TOKEN"}
    done = subprocess.run(
        [*cmd, "--http", "--host", "0.0.0.0", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    message = "--token is empty" if extra else "set --token (or $SLEUTH_MCP_TOKEN)"
    assert done.stderr.startswith("error: ") and message in done.stderr


@pytest.mark.parametrize(
    ("host", "token", "insecure", "notice"),
    [
        ("127.0.0.1", None, False, "this machine only (Host and Origin checked), no token"),
        ("localhost", "t", False, "clients must send 'Authorization: Bearer <token>'"),
        ("0.0.0.0", "t", False, "clients must send 'Authorization: Bearer <token>'"),
        ("192.168.1.5", None, True, "WARNING: --insecure: http://192.168.1.5:1/mcp serves anyone"),
    ],
)
def test_http_notice_says_who_can_reach_the_server(host, token, insecure, notice):
    assert notice in http_notice(host, 1, token, insecure)


def test_http_notice_refuses_an_unguarded_network_bind():
    for host in ("0.0.0.0", "::", "10.0.0.7", "myhost.example"):
        with pytest.raises(InputError, match="--insecure"):
            http_notice(host, 1, None, False)


def test_bad_index_exits_2_with_one_line(tmp_path: Path):
    cmd = [sys.executable, "-m", "sleuth.cli", "serve", "mcp", "--index", str(tmp_path / "none")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "not a sleuth index" in done.stderr


@pytest.mark.parametrize(
    ("policy", "options", "message"),
    [
        ("heuristic", {"model": "m"}, "not both"),  # two policies at once
        (None, {"base_url": "http://127.0.0.1:1/v1"}, "--base-url needs --model"),
        ("bm25", {}, "eval baseline"),  # needs the eval runner's one-retriever toolbox
        ("nonsense", {}, "unknown policy"),
    ],
)
def test_policy_choice_errors_name_the_fix(policy, options, message):
    with pytest.raises(InputError, match=message):
        policy_factory_for(policy, **options)


def test_policy_choices_make_fresh_policies():
    heuristic = policy_factory_for()
    assert heuristic(0) is not heuristic(0) and heuristic(0).name == "heuristic"
    chat = policy_factory_for(model="m", base_url="http://127.0.0.1:1/v1")(0)
    assert isinstance(chat, OpenAIChatPolicy)


def test_store_down_mid_session_reaches_the_caller_with_its_cause(tmp_path: Path):
    """A Chroma server that stops mid-session: the error names the cause, not a bare
    "Error executing tool"; tools that do not need the store keep working."""
    port = free_port()
    exe = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    chroma = subprocess.Popen(
        [exe, "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1"]
        + ["--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, chroma, timeout_s=60)
        index = tmp_path / "index"
        Index.create(index, embedder="hash", chroma_url=url).ingest(DOCS)
        params = StdioServerParameters(
            command=sys.executable, args=server_args(index), env=dict(os.environ)
        )

        async def run() -> list[CallToolResult]:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                up = await s.call_tool("search_corpus", {"query": "river Egypt"})
                chroma.terminate()
                chroma.wait(timeout=20)
                down = await s.call_tool("search_corpus", {"query": "river Egypt"})
                return [up, down, await s.call_tool("grep_corpus", {"pattern": "glaciers"})]

        up, down, grep = anyio.run(run)
    finally:
        if chroma.poll() is None:
            chroma.kill()
            chroma.wait(timeout=20)
    assert not up.is_error and structured(up)["result"]
    assert down.is_error and text(down).startswith("Error: the tool failed: ConnectError")
    [item] = structured(down)["result"]
    assert "ConnectError" in item["error"]
    assert [c["id"] for c in structured(grep)["result"]] == ["alps_0"]


def test_a_long_reply_is_cut_to_the_limit_and_says_so():
    hits = [{"id": f"d{i}_0", "text": "x" * 1000} for i in range(50)]
    reply = CallToolResult(
        content=[TextContent(type="text", text="y" * 60_000)],
        structured_content={"result": hits},
    )
    assert bounded(reply, limit=200_000) is reply
    cut = bounded(reply, limit=20_000)
    assert len(cut.model_dump_json(by_alias=True, exclude_none=True).encode()) <= 20_000
    kept = structured(cut)["result"]
    assert 0 < len(kept) < 50 and kept == hits[: len(kept)]  # the best hits, in order
    assert "reply cut" in structured(cut)["note"] and text(cut).endswith(structured(cut)["note"])


def test_search_whose_policy_never_answered_is_an_error_result(index_dir: Path, tmp_path: Path):
    """Not an empty list: the caller learns the endpoint and the cause."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    agent = Agent(
        Toolbox(Index.open(index_dir)),
        lambda seed: OpenAIChatPolicy("m", base_url=dead, max_retries=0),
    )
    tools = SleuthTools(agent, McpServerConfig(trajectory_dir=tmp_path))
    reply = tools.search(QUESTION)
    assert reply.is_error and reply.structured_content is None
    assert dead in text(reply) and "Connection refused" in text(reply)
    assert len(list(tmp_path.iterdir())) == 1  # the trajectory is still written


def test_describe_corpus_and_where_filters_over_mcp(stdio_replies):
    tools = {t.name: t for t in stdio_replies["tools"]}
    assert "where" in tools["search_corpus"].input_schema["properties"]
    assert "where" in tools["grep_corpus"].input_schema["properties"]
    described = text(stdio_replies["describe"])
    assert "- continent:" in described and '"Europe": 1' in described
    assert [c["doc_id"] for c in structured(stdio_replies["search_where"])["result"]] == ["alps"]
    bad = stdio_replies["grep_where_unknown"]
    assert bad.is_error and "unknown field 'planet'" in text(bad)
