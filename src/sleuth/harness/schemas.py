"""The four tool schemas the policy sees, in OpenAI function-calling JSON.

The harness, the Toolbox and the MCP server all expose exactly these, so a policy trained
against one sees the same tools everywhere.
"""

from __future__ import annotations

from typing import Any

SEARCH_CORPUS = "search_corpus"
GREP_CORPUS = "grep_corpus"
READ_DOCUMENT = "read_document"
PRUNE_CHUNKS = "prune_chunks"
TOOL_NAMES = (SEARCH_CORPUS, GREP_CORPUS, READ_DOCUMENT, PRUNE_CHUNKS)


def _function(name: str, description: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": params,
                "required": list(params),
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _function(
        SEARCH_CORPUS,
        "Hybrid keyword and semantic search over the corpus. Returns the best new chunks, each "
        "with its chunk id and token count; chunks you have already been shown are never "
        "returned again.",
        {"query": {"type": "string", "description": "What to look for, in natural language."}},
    ),
    _function(
        GREP_CORPUS,
        "Regular-expression search over chunk texts; returns at most 5 matching chunks. Use it "
        "for exact names, numbers and phrases.",
        {"pattern": {"type": "string", "description": "A Python regular expression."}},
    ),
    _function(
        READ_DOCUMENT,
        "Read a whole document by id, chunk by chunk in order. A long document is cut to the "
        "chunks most relevant to the search that found it, and the result says what was left out.",
        {"doc_id": {"type": "string", "description": "A document id (a chunk id also works)."}},
    ),
    _function(
        PRUNE_CHUNKS,
        "Remove chunks from your context to free tokens and cut noise. Pruned chunks disappear "
        "from earlier tool results; ids that are unknown or already pruned are reported.",
        {
            "chunk_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids of the chunks to remove, as shown in the results.",
            }
        },
    ),
]
