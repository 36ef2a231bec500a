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


# Characters that decide where tiktoken's pieces end: letters of each case and script, a mark,
# a modifier, digits, apostrophes, punctuation, backslashes and line breaks.
_TRICKY = st.text(alphabet="aZnN'’[#\\/.,: \n\r\t0é\u0301ʰ中ßİ\"", max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TRICKY, min_size=1, max_size=6))
def test_counts_cut_at_line_breaks_equal_whole_counts(parts: list[str]) -> None:
    """A message whose text has blank lines before capitals, "[" or "#" (a result's blocks, the
    usage line) is counted in pieces: the sum must equal the count of the whole JSON."""
    content = "\n\n".join(parts)
    for message in (
        {"role": "tool", "tool_call_id": "c1", "content": content},
        {"role": "tool", "content": f"{content}\n\n[Token usage: 12/34]"},
        {"role": "user", "content": f"{content}\n\nYour context is past half.\n\n# D\nx"},
    ):
        assert ChatTokenCounter()([message], []) == _fresh([message], [])
