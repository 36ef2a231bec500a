"""Counting the tokens of a chat request when the policy has no exact template at hand.

A request is counted as the tokens of each message's JSON plus those of the tool schemas' JSON
(o200k_base by default). The sum is deterministic, close to what chat templates add, and cheap
to repeat: each distinct message is tokenised once, so recounting a view after a prune only
tokenises the messages that changed.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from sleuth.tokens import TokenCounter, default_counter

_CACHE_SIZE = 8192  # distinct message texts remembered (a run has a few hundred at most)


class ChatTokenCounter:
    """``counter(messages, tools) -> int``, summing per-message JSON token counts."""

    def __init__(self, counter: TokenCounter | None = None):
        self._count_text = lru_cache(maxsize=_CACHE_SIZE)((counter or default_counter()).count)

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return sum(self._count_text(_json(m)) for m in messages) + self._count_text(_json(tools))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
