"""OpenAI function-calling schemas of the four tools the policy sees."""

from __future__ import annotations

from typing import Any


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


SEARCH = _function(
    "search_corpus",
    "Hybrid keyword (BM25) and semantic search over the corpus. Returns new chunks only: chunks "
    "already shown by an earlier search are never repeated.",
    {"query": {"type": "string", "description": "What to look for."}},
    ["query"],
)
GREP = _function(
    "grep_corpus",
    "Regular-expression search over chunk texts (Python syntax); returns at most 5 matching chunks.",
    {"pattern": {"type": "string", "description": "A regular expression, e.g. \\bArsenal\\b."}},
    ["pattern"],
)
READ = _function(
    "read_document",
    "Read a whole document by id (a chunk id also works). Long documents are cut to the chunks most "
    "relevant to your search, and the reply says what was left out.",
    {"doc_id": {"type": "string", "description": "Document id, or a chunk id <doc_id>_<n>."}},
    ["doc_id"],
)
PRUNE = _function(
    "prune_chunks",
    "Remove chunks you no longer need from your context, to free token budget. Pruned chunks stay "
    "excluded from later searches.",
    {
        "chunk_ids": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Chunk ids to remove.",
        }
    },
    ["chunk_ids"],
)

TOOL_SCHEMAS: list[dict[str, Any]] = [SEARCH, GREP, READ, PRUNE]
TOOL_NAMES = [s["function"]["name"] for s in TOOL_SCHEMAS]
