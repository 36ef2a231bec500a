"""The context view (pruning re-renders, never edits text) and tool-call validation."""

from __future__ import annotations

import pytest

from sleuth.harness.calls import ParsedCall, arguments_json, parse_call
from sleuth.harness.policy import ToolCall
from sleuth.harness.view import ContextView, Observation
from sleuth.tools.types import ChunkHit, ToolResult, render_chunk


def hit(cid: str) -> ChunkHit:
    return ChunkHit(id=cid, doc_id=cid.split("_")[0], text=f"text of {cid}", tokens=4)


def make_view() -> tuple[ContextView, Observation, Observation]:
    view = ContextView("SYS", "<query>q</query>")
    view.add_message({"role": "assistant", "content": None, "tool_calls": []})
    first = view.add_observation(
        Observation(ToolResult(tool="search_corpus", chunks=[hit("a_0"), hit("a_1")]), "c1")
    )
    second = view.add_observation(
        Observation(ToolResult(tool="grep_corpus", chunks=[hit("b_0")], note="N"), "c2")
    )
    second.suffix = "[Token usage: 10/100]"
    return view, first, second


def test_prune_hides_only_named_blocks():
    view, _, _ = make_view()
    before = view.messages()
    assert view.prune(["a_0", "zz", "a_0"]) == (["a_0"], ["zz"])
    after = view.messages()
    assert before[:3] == after[:3]  # system, user, assistant untouched
    assert after[3]["content"] == render_chunk(hit("a_1"))
    assert before[3]["content"] == render_chunk(hit("a_0")) + "\n\n" + render_chunk(hit("a_1"))
    assert after[4] == before[4]  # the other result, its note and usage line untouched
    assert after[4]["content"].endswith("N\n\n[Token usage: 10/100]")


def test_prune_twice_reports_unknown_and_all_pruned_result():
    view, _, _ = make_view()
    view.prune(["b_0"])
    assert view.prune(["b_0"]) == ([], ["b_0"])
    assert view.messages()[4]["content"].startswith("All chunks of this result were pruned.")
    assert view.visible_ids() == ["a_0", "a_1"]


def test_messages_are_openai_chat_shapes():
    view, _, _ = make_view()
    view.add_observation(Observation("Your reply was empty."))
    roles = [(m["role"], m.get("tool_call_id")) for m in view.messages()]
    assert roles == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
    ]


def test_error_results_show_no_chunks():
    view = ContextView("S", "U")
    view.add_observation(Observation(ToolResult(tool="grep_corpus", error="bad pattern"), "c"))
    assert view.visible_ids() == []
    assert view.messages()[-1]["content"] == "Error: bad pattern"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search_corpus", '{"query": "nile"}', {"query": "nile"}),
        ("grep_corpus", '{"pattern": "Nile", "extra": 1}', {"pattern": "Nile"}),  # extras ignored
        ("read_document", '{"doc_id": "d1_2"}', {"doc_id": "d1_2"}),
        ("prune_chunks", '{"chunk_ids": ["a_1", "b_2"]}', {"chunk_ids": ["a_1", "b_2"]}),
        ("prune_chunks", '{"chunk_ids": "[\\"a_1\\"]"}', {"chunk_ids": ["a_1"]}),  # JSON in a str
        ("prune_chunks", '{"chunk_ids": "a_1"}', {"chunk_ids": ["a_1"]}),  # a single id
        ("search_corpus", '{"query": 5}', "'query' must be a non-empty string (got int)"),
        ("search_corpus", "{}", "'query' must be a non-empty string (got nothing)"),
        ("search_corpus", '{"query": "x"', "not valid JSON"),  # truncated JSON
        ("search_corpus", '["x"]', "expected a JSON object, got list"),
        ("prune_chunks", '{"chunk_ids": [1, 2]}', "must be an array of strings"),
        ("fly", "{}", "Unknown tool 'fly'"),
    ],
)
def test_parse_call(name, arguments, expected):
    parsed = parse_call(ToolCall(id="c", name=name, arguments=arguments))
    if isinstance(expected, dict):
        assert parsed == ParsedCall(call_id="c", name=name, args=expected)
    else:
        assert isinstance(parsed, str) and expected in parsed


def test_broken_arguments_are_echoed_as_empty_object():
    assert arguments_json('{"query": "x"}') == '{"query": "x"}'
    assert arguments_json('{"query": ') == "{}"
