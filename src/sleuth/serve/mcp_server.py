"""The retrieval tools and the whole subagent over MCP (SPEC §2, §8 ``sleuth serve mcp``).

Built on the official ``mcp`` SDK (v2 ``MCPServer``, formerly FastMCP). Six tools:

* ``search_corpus``, ``grep_corpus`` (with an optional ``where`` metadata filter),
  ``read_document``, ``describe_corpus``: one :class:`Toolbox` call each. The text content is
  what the policy sees (:func:`render_result`); the structured content is ``{"result": [...]}``,
  the SPEC §8 tool JSON (chunks ``{id, doc_id, text, tokens, score}`` then ``{error}`` when the
  call failed), wrapped as MCP structured content must be an object; a failure sets ``isError``.
* ``prune_chunks``: an acknowledgement. An MCP client owns its context, so the server cannot
  edit it; the call sorts the ids into chunks that exist in the index and unknown ids, and the
  client drops the acknowledged blocks itself.
* ``search``: the whole subagent (harness + policy) on one query; the ``sleuth run --json``
  object as structured content, the ranked list as text, the trajectory written to a file.

The server keeps no state between calls: the harness's dedup becomes ``search_corpus``'s
``exclude_chunk_ids`` argument. Results therefore depend only on the arguments, several clients
can share one server, and the HTTP transport runs stateless.

A failing store (a Chroma server gone mid-session) reaches the caller as an error result that
names the cause, like any tool error; so does a ``search`` whose policy never answered. Every
reply stays under the 1 MB a client accepts (:mod:`sleuth.serve.limits`): a longer one is cut
and says so. String arguments are capped (``MAX_ARGUMENT_CHARS``), so
an error never echoes a megabyte argument back. Over HTTP, a bind beyond loopback, where the
SDK drops its Host/Origin checks, needs a bearer token or an explicit ``insecure``; ``GET /mcp``
answers at once (a stateless server has no event stream), so readiness probes never hang.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast
from uuid import uuid4

from pydantic import BaseModel, Field

from sleuth.errors import InputError
from sleuth.extras import missing_extra

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, TextContent
except ImportError as _exc:  # the `serve` extra is not installed
    raise missing_extra("serve", _exc) from _exc
from sleuth.api.agent import Agent
from sleuth.harness.act import ToolJob, call_tool, failure_text
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.run import RunResult
from sleuth.policies.spec import (
    BuiltPolicy,
    PolicyFactory,
    PolicyOptions,
    build_policy,
    spec_from_options,
)
from sleuth.serve.http import (
    SERVER_NAME,
    McpGate,
    check_bindable,
    http_notice,
)
from sleuth.serve.limits import bounded
from sleuth.tools.spec import DESCRIBE, GREP, PRUNE, READ, SEARCH, WHERE_DESCRIPTION
from sleuth.tools.toolbox import Toolbox, ToolConfig
from sleuth.tools.types import ChunkHit, ToolResult, render_result

Transport = Literal["stdio", "http"]

DEFAULT_HOST = "127.0.0.1"  # local only; expose it further on purpose, behind your own auth
DEFAULT_PORT = 8765  # not 8000, which `chroma run` takes by default
MAX_ARGUMENT_CHARS = 8192  # longer strings are refused before any work, never echoed back
INSTRUCTIONS = (
    "Search a document corpus. `search` runs the whole search subagent and returns ranked "
    f"documents with justifications. {SEARCH.name}, {GREP.name} and {READ.name} are its single "
    "retrieval tools; pass the chunk ids you have already seen as exclude_chunk_ids to get new "
    f"ones, and {PRUNE.name} to confirm which chunks to drop from your own context. "
    f"{DESCRIBE.name} lists the metadata fields that {SEARCH.name} and {GREP.name} filter by."
)


@dataclass(frozen=True)
class McpServerConfig:
    """How the MCP server runs the retrieval tools and the subagent."""

    reranker: str | None = None
    """Reranker spec for search_corpus (``none``, ``cross-encoder:PATH``,
    ``endpoint:MODEL@URL``); default none, RRF order (SPEC §1)."""
    harness: HarnessConfig = field(default_factory=HarnessConfig)
    """Loop settings of the ``search`` tool (SPEC §3 defaults)."""
    budget: int | None = None
    """Token budget T of the ``search`` tool; overrides ``harness.budget`` when set."""
    trajectory_dir: Path | None = None
    """Where ``search`` writes trajectories; default ``$SLEUTH_HOME/runs``."""


class ErrorItem(BaseModel):
    """The last item of a failed tool call's list (SPEC §8)."""

    error: str


class ChunkListing(BaseModel):
    """Structured content of a retrieval tool: the SPEC §8 list under ``result``."""

    result: list[ChunkHit | ErrorItem]


class PruneAck(BaseModel):
    """Structured content of ``prune_chunks``."""

    pruned: list[str]
    """Ids of chunks in the index: drop their blocks from your context."""
    unknown: list[str]
    """Ids that name no chunk of the index (reported, not fatal: SPEC §2)."""


Text = Annotated[str, Field(max_length=MAX_ARGUMENT_CHARS)]
QueryArg = Annotated[Text, Field(description=SEARCH.argument_description)]
ExcludeArg = Annotated[
    list[Text] | None,
    Field(description="Chunk ids you have already seen; they are never returned again."),
]
PatternArg = Annotated[Text, Field(description=GREP.argument_description)]
DocIdArg = Annotated[Text, Field(description=READ.argument_description)]
ReadQueryArg = Annotated[
    Text | None,
    Field(description="What you are looking for; a long document keeps the chunks closest to it."),
]
WhereArg = Annotated[dict[str, Any] | None, Field(description=WHERE_DESCRIPTION)]
ChunkIdsArg = Annotated[list[Text], Field(description="Chunk ids to remove from your context.")]
QuestionArg = Annotated[Text, Field(description="The question to find supporting documents for.")]


def tool_json(result: ToolResult) -> list[dict[str, Any]]:
    """The SPEC §8 JSON of one tool call: its chunks, then ``{"error"}`` if it failed."""
    items: list[dict[str, Any]] = [c.model_dump() for c in result.chunks]
    if result.error is not None:
        items.append({"error": result.error})
    return items


def tool_reply(result: ToolResult) -> CallToolResult:
    """Policy-visible text plus the SPEC §8 list; a tool error is a result, never an exception."""
    return bounded(
        CallToolResult(
            content=[TextContent(type="text", text=render_result(result))],
            structured_content={"result": tool_json(result)},
            is_error=not result.ok,
        )
    )


def error_reply(message: str) -> CallToolResult:
    return bounded(
        CallToolResult(content=[TextContent(type="text", text=f"Error: {message}")], is_error=True)
    )


def render_run(run: RunResult) -> str:
    """The ranked list as a reader model would want it, then how the run went."""
    lines = [f"{d.rank}. {d.id}: {d.justification}" for d in run.documents]
    if not lines:
        lines.append("No documents found.")
    status = f"turns {run.turns}, tool calls {run.tool_calls}, stop {run.stop_reason}"
    lines.append(f"\n({status}; trajectory {run.trajectory})")
    if run.error:
        lines.append(f"Error: {run.error}")
    return "\n".join(lines)


class SleuthTools:
    """The six MCP tools over one agent (its tools serve the five); every method is stateless."""

    def __init__(self, agent: Agent, config: McpServerConfig):
        self.agent = agent
        self.toolbox = cast(Toolbox, agent.tools)  # build_server opens the agent over an index
        self.config = config

    def search_corpus(
        self, query: QueryArg, exclude_chunk_ids: ExcludeArg = None, where: WhereArg = None
    ) -> Annotated[CallToolResult, ChunkListing]:
        job = ToolJob(SEARCH.name, query, None, exclude=exclude_chunk_ids or (), where=where)
        return tool_reply(call_tool(self.toolbox, job))

    def grep_corpus(
        self, pattern: PatternArg, where: WhereArg = None
    ) -> Annotated[CallToolResult, ChunkListing]:
        return tool_reply(call_tool(self.toolbox, ToolJob(GREP.name, pattern, None, where=where)))

    def describe_corpus(self) -> Annotated[CallToolResult, ChunkListing]:
        return tool_reply(call_tool(self.toolbox, ToolJob(DESCRIBE.name, "", None)))

    def read_document(
        self, doc_id: DocIdArg, query: ReadQueryArg = None
    ) -> Annotated[CallToolResult, ChunkListing]:
        job = ToolJob(READ.name, doc_id, None, read_query=query)
        return tool_reply(call_tool(self.toolbox, job))

    def prune_chunks(self, chunk_ids: ChunkIdsArg) -> Annotated[CallToolResult, PruneAck]:
        ids = list(dict.fromkeys(chunk_ids))
        try:
            pruned = [i for i in ids if self.toolbox.index.chunk(i) is not None]
        except Exception as exc:  # the store failed: say why, as the retrieval tools do
            return error_reply(failure_text(exc))
        unknown = [i for i in ids if i not in pruned]
        text = f"Pruned {len(pruned)} chunk(s)" + (f": {', '.join(pruned)}." if pruned else ".")
        if unknown:
            text += f" Not in the index: {', '.join(unknown)}."
        return bounded(
            CallToolResult(
                content=[TextContent(type="text", text=text)],
                structured_content=PruneAck(pruned=pruned, unknown=unknown).model_dump(),
            )
        )

    def search(self, query: QuestionArg) -> Annotated[CallToolResult, RunResult]:
        try:
            run = self.agent.search(query, trajectory=self._trajectory_path())
        except InputError as exc:  # a blank query or a bad budget: the caller's to fix
            return error_reply(str(exc))
        except Exception as exc:  # e.g. the trajectory folder is not writable
            return error_reply(failure_text(exc))
        if run.stop_reason == "policy_error":  # nothing found because nothing ran
            return error_reply(f"the subagent's policy failed: {run.error}")
        return bounded(
            CallToolResult(
                content=[TextContent(type="text", text=render_run(run))],
                structured_content=run.model_dump(mode="json"),
                is_error=run.error is not None,
            )
        )

    def _trajectory_path(self) -> Path | None:
        folder = self.config.trajectory_dir
        return folder / f"mcp-{uuid4().hex}.jsonl" if folder else None


def tool_descriptions(tools: ToolConfig, harness: HarnessConfig) -> dict[str, str]:
    """What each MCP tool does, with the limits this server really applies."""
    return {
        SEARCH.name: (
            "Hybrid keyword (BM25) and semantic search over the corpus, fused by reciprocal rank; "
            f"at most {tools.search_max_chunks} chunks within {tools.search_max_tokens:,} tokens, "
            "each shown with its id and token count. The server remembers nothing: pass the ids "
            "you have already seen as exclude_chunk_ids."
        ),
        GREP.name: GREP.description,
        READ.name: READ.description,
        DESCRIBE.name: DESCRIBE.description,
        PRUNE.name: (
            "Confirm chunks to remove from your own context to free token budget. The server "
            "keeps no context of yours: it reports which ids exist in the index (drop those "
            "blocks yourself) and which are unknown; keep passing pruned ids as exclude_chunk_ids."
        ),
        "search": (
            "Run the whole search subagent on a question: it searches over several turns, prunes "
            f"its own context and returns up to {harness.max_documents} ranked documents, each "
            "with a short justification, plus the path of the full trajectory. It does not answer "
            "the question."
        ),
    }


def build_server(
    index_dir: str | Path,
    policy: BuiltPolicy | PolicyFactory | None = None,
    config: McpServerConfig | None = None,
) -> MCPServer:
    """An MCP server exposing the five tools and the ``search`` subagent over one index.

    Args:
        index_dir: a finished sleuth index (``sleuth ingest``).
        policy: the ``search`` subagent: a built spec (its tools serve the four tools too, e.g.
            with the learned ranker) or a factory of fresh policies (they keep per-run state);
            default :data:`~sleuth.policies.spec.DEFAULT_POLICY`, which needs no model.
        config: reranker, harness and trajectory settings.

    Returns:
        The server, not yet running (``server.run("stdio")``, or see :func:`serve`).

    Raises:
        InputError: ``index_dir`` is not a finished index.

    Example::

        build_server("corpus-index").run("stdio")
    """
    config = config or McpServerConfig()
    agent = Agent(
        index_dir,
        policy or serving_policy(),
        harness=config.harness,
        budget=config.budget,
        reranker=config.reranker,
    )
    tools = SleuthTools(agent, config)
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)
    for name, description in tool_descriptions(tools.toolbox.config, agent.harness).items():
        server.add_tool(getattr(tools, name), name=name, description=description)
    return server


def serving_policy(
    policy: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str = "EMPTY",
) -> BuiltPolicy:
    """The subagent policy the command line asked for: a spec (``--policy``), or the older
    ``--model``/``--base-url`` options (:func:`sleuth.policies.spec.spec_from_options`).

    Raises:
        InputError: contradictory options, an unknown spec, or a one-retriever baseline
            (``bm25``/``dense`` need the eval runner's toolbox).
    """
    spec = spec_from_options(policy, model=model, base_url=base_url)
    if spec in ("bm25", "dense"):
        raise InputError(f"--policy {spec} is an eval baseline; serve heuristic or a model")
    return build_policy(spec, PolicyOptions(api_key=api_key))


def policy_factory_for(
    policy: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str = "EMPTY",
) -> PolicyFactory:
    """seed -> fresh policy of :func:`serving_policy`."""
    return serving_policy(policy, model=model, base_url=base_url, api_key=api_key).factory


def serve(
    index_dir: str | Path,
    transport: Transport = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    policy: BuiltPolicy | PolicyFactory | None = None,
    config: McpServerConfig | None = None,
    token: str | None = None,
    insecure: bool = False,
) -> None:
    """Serve ``index_dir`` over MCP: :func:`build_server`, then :func:`run_server`.

    Raises:
        InputError: a bad index, or an HTTP bind beyond loopback without a token or ``insecure``
            (checked first, before the index loads).
    """
    if transport == "http":
        http_notice(host, port, token, insecure)
        check_bindable(host, port)
    server = build_server(index_dir, policy, config)
    run_server(server, transport, host, port, token=token, insecure=insecure)


def run_server(
    server: MCPServer,
    transport: Transport,
    host: str,
    port: int,
    *,
    token: str | None = None,
    insecure: bool = False,
) -> None:
    """Serve until stdin closes (stdio) or the process is stopped (http).

    ``http`` is streamable HTTP at ``http://HOST:PORT/mcp``, stateless since no tool keeps state;
    with a ``token`` every request must carry ``Authorization: Bearer TOKEN``. Before serving,
    the HTTP server says on stderr who can reach it.

    Raises:
        InputError: ``host`` is not a loopback name and there is neither a token nor ``insecure``.
    """
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    print(http_notice(host, port, token, insecure), file=sys.stderr, flush=True)
    app = McpGate(server.streamable_http_app(stateless_http=True, host=host), token)
    uvicorn.run(app, host=host, port=port, log_level=server.settings.log_level.lower())
