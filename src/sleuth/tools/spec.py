"""The tools the policy calls, each declared once.

A :class:`ToolSpec` is the one record of a tool: its name, its argument, the JSON schema sent to
the model, and the callable that runs it over :class:`~sleuth.tools.base.Tools`. The harness's
dispatcher and argument validation, the MCP server, the schemas a policy is sent, the reward's
prune count and the datagen agent all read these records; no other module spells a tool's name
(``tests/test_tool_spec.py`` checks).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from sleuth.tools.base import Tools
from sleuth.tools.types import ToolResult

ArgumentKind = Literal["string", "string_list", "none"]
WHERE = "where"
"""The optional metadata filter of ``search_corpus`` and ``grep_corpus`` (Chroma's grammar)."""
WHERE_DESCRIPTION = (
    "Optional metadata filter in Chroma's where grammar, e.g. "
    '{"from": "a@b.com"} or {"date": {"$gte": "2001-05-01"}}; describe_corpus lists the fields.'
)
_WHERE_SCHEMA = {"type": "object", "description": WHERE_DESCRIPTION}


class ToolRunner(Protocol):
    """Runs one retrieval call: the argument, the ids to leave out, the output budget, the
    query that surfaced a document (``read_document`` only) and the metadata filter."""

    def __call__(
        self,
        tools: Tools,
        argument: str,
        exclude: Collection[str],
        max_tokens: int | None,
        read_query: str | None,
        where: dict[str, Any] | None,
    ) -> ToolResult: ...


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the model is told, what it must pass, and what runs it."""

    name: str
    """The function name the model calls."""
    description: str
    """What the model is told the tool does."""
    argument: str
    """The one argument the model passes (``query``, ``pattern``, ``doc_id``, ``chunk_ids``;
    empty for a tool without one)."""
    argument_kind: ArgumentKind
    """``string``: a non-empty string; ``string_list``: an array of strings; ``none``: no
    argument."""
    argument_description: str
    """The argument's description in the JSON schema."""
    run: ToolRunner | None
    """The call over :class:`Tools`; None for ``prune_chunks``, which edits the caller's own
    context (the harness's view, an MCP client's messages) rather than the corpus."""
    filtered: bool = False
    """Whether the tool takes the optional :data:`WHERE` metadata filter."""

    @property
    def retrieval(self) -> bool:
        """Whether the tool reads the corpus (every tool but the prune)."""
        return self.run is not None

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema sent to the model."""
        prop: dict[str, Any] = {"type": "string", "description": self.argument_description}
        if self.argument_kind == "string_list":
            items = {"type": "string"}
            prop = {"type": "array", "items": items, "description": self.argument_description}
        props = {} if self.argument_kind == "none" else {self.argument: prop}
        if self.filtered:
            props[WHERE] = dict(_WHERE_SCHEMA)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": props,
                    "required": [] if self.argument_kind == "none" else [self.argument],
                    "additionalProperties": False,
                },
            },
        }


def _filter(where: dict[str, Any] | None) -> dict[str, Any]:
    """``where`` as a keyword only when given, so tools without filters still serve calls
    that use none."""
    return {} if where is None else {WHERE: where}


def _search(
    tools: Tools,
    argument: str,
    exclude: Collection[str],
    max_tokens: int | None,
    read_query: str | None,
    where: dict[str, Any] | None,
) -> ToolResult:
    return tools.search_corpus(argument, exclude=exclude, max_tokens=max_tokens, **_filter(where))


def _grep(
    tools: Tools,
    argument: str,
    exclude: Collection[str],
    max_tokens: int | None,
    read_query: str | None,
    where: dict[str, Any] | None,
) -> ToolResult:
    return tools.grep_corpus(argument, exclude=exclude, max_tokens=max_tokens, **_filter(where))


def _read(
    tools: Tools,
    argument: str,
    exclude: Collection[str],
    max_tokens: int | None,
    read_query: str | None,
    where: dict[str, Any] | None,
) -> ToolResult:
    return tools.read_document(argument, query=read_query, max_tokens=max_tokens)


def _describe(
    tools: Tools,
    argument: str,
    exclude: Collection[str],
    max_tokens: int | None,
    read_query: str | None,
    where: dict[str, Any] | None,
) -> ToolResult:
    return tools.describe_corpus(max_tokens=max_tokens)


SEARCH = ToolSpec(
    name="search_corpus",
    description="Hybrid keyword (BM25) and semantic search over the corpus. Returns new chunks "
    "only: chunks already shown by an earlier search are never repeated.",
    argument="query",
    argument_kind="string",
    argument_description="What to look for.",
    run=_search,
    filtered=True,
)
GREP = ToolSpec(
    name="grep_corpus",
    description="Regular-expression search over chunk texts (Python syntax); returns at most 5 "
    "matching chunks.",
    argument="pattern",
    argument_kind="string",
    argument_description="A regular expression, e.g. \\bArsenal\\b.",
    run=_grep,
    filtered=True,
)
READ = ToolSpec(
    name="read_document",
    description="Read a whole document by id (a chunk id also works). Long documents are cut to "
    "the chunks most relevant to your search, and the reply says what was left out.",
    argument="doc_id",
    argument_kind="string",
    argument_description="Document id, or a chunk id <doc_id>_<n>.",
    run=_read,
)
PRUNE = ToolSpec(
    name="prune_chunks",
    description="Remove chunks you no longer need from your context, to free token budget. "
    "Pruned chunks stay excluded from later searches.",
    argument="chunk_ids",
    argument_kind="string_list",
    argument_description="Chunk ids to remove.",
    run=None,
)

DESCRIBE = ToolSpec(
    name="describe_corpus",
    description="The corpus's metadata fields (sender, date, form, ...): their types, their "
    "values with counts for small vocabularies, ranges for dates and numbers. Use them in the "
    "where filter of search_corpus and grep_corpus.",
    argument="",
    argument_kind="none",
    argument_description="",
    run=_describe,
)

TOOLS: tuple[ToolSpec, ...] = (SEARCH, GREP, READ, PRUNE, DESCRIBE)
"""Every tool, in the order the model is shown them."""
ORIGINAL_TOOLS: tuple[str, ...] = (SEARCH.name, GREP.name, READ.name, PRUNE.name)
"""The tool set before ``describe_corpus`` and filters: what an adapter trained without a
recorded tool list is offered (its ``sleuth_policy.json``)."""
TOOL_BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}
TOOL_NAMES: list[str] = [t.name for t in TOOLS]
TOOL_SCHEMAS: list[dict[str, Any]] = [t.schema for t in TOOLS]
"""The schemas a policy is sent (OpenAI function calling)."""

SEARCH_CORPUS = SEARCH.name
GREP_CORPUS = GREP.name
READ_DOCUMENT = READ.name
PRUNE_CHUNKS = PRUNE.name
DESCRIBE_CORPUS = DESCRIBE.name


def tool_schemas(names: Sequence[str]) -> list[dict[str, Any]]:
    """The schemas of the named tools, in :data:`TOOLS` order; the four original tools are sent
    without the ``where`` filter (a model trained on them never saw it)."""
    chosen = [t for t in TOOLS if t.name in names]
    if DESCRIBE.name not in names:
        chosen = [replace(t, filtered=False) for t in chosen]
    return [t.schema for t in chosen]
