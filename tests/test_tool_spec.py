"""Each tool is declared once: one ToolSpec record per tool, read by the rest."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sleuth
from sleuth.harness.act import ToolJob, call_tool
from sleuth.harness.calls import ParsedCall, parse_call
from sleuth.harness.policy import ToolCall
from sleuth.reward import PRUNE_TOOL
from sleuth.tools.spec import (
    DESCRIBE,
    ORIGINAL_TOOLS,
    PRUNE,
    SEARCH,
    TOOL_NAMES,
    TOOL_SCHEMAS,
    TOOLS,
    tool_schemas,
)
from tests.fakes import FakeTools

SRC = Path(sleuth.__file__).parent
RECORD = SRC / "tools" / "spec.py"


def test_no_tool_name_literal_outside_the_record():
    """A string constant equal to a tool's name appears only in ``sleuth/tools/spec.py``."""
    names = set(TOOL_NAMES)
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == RECORD:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert not found, "tool names spelled outside sleuth.tools.spec:\n" + "\n".join(found)


def test_every_consumer_reads_the_records():
    assert [s["function"]["name"] for s in TOOL_SCHEMAS] == [t.name for t in TOOLS]
    for spec, schema in zip(TOOLS, TOOL_SCHEMAS, strict=True):
        params = schema["function"]["parameters"]
        assert params["required"] == ([] if spec.argument_kind == "none" else [spec.argument])
        assert ("where" in params["properties"]) == spec.filtered
        assert schema["function"]["description"] == spec.description
    assert PRUNE.name == PRUNE_TOOL and not PRUNE.retrieval
    assert all(t.retrieval for t in TOOLS if t is not PRUNE)


@pytest.mark.parametrize(
    "spec", [t for t in TOOLS if t.retrieval and t.argument_kind != "none"], ids=lambda t: t.name
)
def test_dispatch_and_validation_follow_the_record(spec):
    parsed = parse_call(ToolCall(id="c1", name=spec.name, arguments=f'{{"{spec.argument}": "x"}}'))
    assert isinstance(parsed, ParsedCall) and parsed.args == {spec.argument: "x"}
    blank = parse_call(ToolCall(id="c2", name=spec.name, arguments="{}"))
    assert isinstance(blank, str) and repr(spec.argument) in blank
    tools = FakeTools()
    call_tool(tools, ToolJob(spec.name, "d1", None))
    assert [(name, arg) for name, arg, _ in tools.calls] == [(spec.name, "d1")]


def test_prune_arguments_follow_the_record():
    parsed = parse_call(ToolCall(id="c", name=PRUNE.name, arguments='{"chunk_ids": ["a_0"]}'))
    assert isinstance(parsed, ParsedCall) and parsed.args == {PRUNE.argument: ["a_0"]}
    result = call_tool(FakeTools(), ToolJob(PRUNE.name, "x", None))
    assert result.error and "not a retrieval tool" in result.error


def test_describe_takes_no_argument_and_filters_are_offered_with_it():
    parsed = parse_call(ToolCall(id="c", name=DESCRIBE.name, arguments="{}"))
    assert isinstance(parsed, ParsedCall) and parsed.args == {}
    tools = FakeTools()
    result = call_tool(tools, ToolJob(DESCRIBE.name, "", 500))
    assert result.ok and [name for name, _, _ in tools.calls] == [DESCRIBE.name]
    where = '{"query": "x", "where": {"from": "a@b.com"}}'
    parsed = parse_call(ToolCall(id="w", name=SEARCH.name, arguments=where))
    assert isinstance(parsed, ParsedCall) and parsed.args["where"] == {"from": "a@b.com"}
    bad = parse_call(ToolCall(id="b", name=SEARCH.name, arguments='{"query": "x", "where": 3}'))
    assert isinstance(bad, str) and "'where' must be an object" in bad
    # the original four, as an old adapter is offered them: no describe, no where
    old = tool_schemas(ORIGINAL_TOOLS)
    assert [s["function"]["name"] for s in old] == list(ORIGINAL_TOOLS)
    assert all("where" not in s["function"]["parameters"]["properties"] for s in old)
    refused = parse_call(ToolCall(id="d", name=DESCRIBE.name, arguments="{}"), ORIGINAL_TOOLS)
    assert isinstance(refused, str) and "Unknown tool" in refused
