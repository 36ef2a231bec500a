"""``describe_corpus``'s reply: the metadata fields as one block the policy can read and prune.

The description is shown as a single chunk (id :data:`DESCRIPTION_ID`) so the harness's budget,
fitting and pruning treat it like any other result. Over its token share it is shortened: long
value lists first, then whole fields, saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sleuth.corpus.models import chunk_id
from sleuth.tools.spec import DESCRIBE
from sleuth.tools.types import ChunkHit

DESCRIPTION_DOC = DESCRIBE.name
"""The pseudo document id of a description (never a corpus document)."""
DESCRIPTION_ID = chunk_id(DESCRIPTION_DOC, 0)
_HINT = (
    'Filter search_corpus / grep_corpus with where, e.g. {"from": "a@b.com"}, '
    '{"date": {"$gte": "2001-05-01"}}, {"$and": [...]}; operators $eq $ne $in $nin $gt $gte $lt '
    "$lte $and $or; dates as ISO strings."
)


def render_description(described: dict[str, Any], values: int | None, fields: int) -> str:
    """The text of a description with at most ``values`` listed values per field (None: all)
    and its first ``fields`` fields."""
    lines = [f"Corpus: {described['documents']} documents. {_HINT}", "Fields:"]
    names = list(described["fields"])
    for name in names[:fields]:
        entry = dict(described["fields"][name])
        for key in ("values", "top_values"):
            if key in entry and values is not None:
                kept = list(entry[key].items())[:values]
                entry[key] = dict(kept)
                if not kept:
                    entry.pop(key)
        lines.append(f"- {name}: {json.dumps(entry, ensure_ascii=False, default=str)}")
    if fields < len(names):
        lines.append(f"({len(names) - fields} more fields left out: {', '.join(names[fields:])})")
    return "\n".join(lines)


def describe_block(
    described: dict[str, Any], budget: int, cost: Callable[[ChunkHit], int]
) -> ChunkHit | None:
    """The longest description whose block fits ``budget`` tokens; None when none does."""
    n_fields = len(described["fields"])
    tries = [(None, n_fields), (5, n_fields), (0, n_fields)]
    tries += [(0, n) for n in range(n_fields - 1, -1, -1)]
    for values, fields in tries:
        text = render_description(described, values, fields)
        hit = ChunkHit(id=DESCRIPTION_ID, doc_id=DESCRIPTION_DOC, text=text, tokens=0)
        hit.tokens = cost(hit)
        if cost(hit) <= budget:
            return hit
    return None
