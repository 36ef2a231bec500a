"""The chat request counter: the count kept per message equals counting its JSON afresh."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sleuth.policies.counting import ChatTokenCounter
from sleuth.tokens import count_tokens

_VALUE = st.one_of(st.text(max_size=40), st.integers(), st.booleans(), st.none())
_MESSAGE = st.dictionaries(st.sampled_from(["role", "content", "tool_call_id", "name"]), _VALUE)


def _fresh(messages: list[dict], tools: list[dict]) -> int:
    dump = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True)  # noqa: E731
    return sum(count_tokens(dump(m)) for m in messages) + count_tokens(dump(tools))


@settings(max_examples=60, deadline=None)
@given(st.lists(_MESSAGE, max_size=6), st.lists(_MESSAGE, max_size=6))
def test_kept_counts_equal_fresh_counts(first: list[dict], second: list[dict]) -> None:
    """Two requests through one counter (the second meets the first's messages again, and
    values equal in Python but not in JSON: 1, True, "1")."""
    counter = ChatTokenCounter()
    tools = [{"type": "function", "function": {"name": "search_corpus"}}]
    for messages in (first, first + second, [*second, {"role": "1"}, {"role": 1}]):
        assert counter(messages, tools) == _fresh(messages, tools)
