"""The heuristic agent's hop rounds on hand-built transcripts: what it prunes and when."""

from __future__ import annotations

import json
from typing import Any

from sleuth.harness.policy import PolicyOutput, assistant_message
from sleuth.policies.heuristic import HeuristicAgent
from sleuth.policies.scripted import call
from sleuth.tools.spec import PRUNE_CHUNKS, SEARCH_CORPUS
from sleuth.tools.types import ChunkHit, ToolResult, render_result

QUESTION = "Who founded the company that built the Zephyr Bridge?"
BUDGET = 32_768


def transcript(rounds: list[list[tuple[str, list[ChunkHit]]]], used: int) -> list[dict[str, Any]]:
    """The chat the harness would send after ``rounds`` of searches (query, chunks shown), the
    last result ending with the usage line ``[Token usage: used/BUDGET]``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "tools"},
        {"role": "user", "content": f"<query>{QUESTION}</query>"},
    ]
    for r, searches in enumerate(rounds):
        calls = [call(SEARCH_CORPUS, f"c{r}_{i}", query=q) for i, (q, _) in enumerate(searches)]
        messages.append(assistant_message("", calls))
        for c, (_, chunks) in zip(calls, searches, strict=True):
            text = render_result(ToolResult(tool=SEARCH_CORPUS, chunks=chunks))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
    messages[-1]["content"] += f"\n\n[Token usage: {used}/{BUDGET}]"
    return messages


def chunk(doc: str, text: str, tokens: int = 1000) -> ChunkHit:
    return ChunkHit(id=f"{doc}_0", doc_id=doc, text=text, tokens=tokens)


def first_round() -> list[list[tuple[str, list[ChunkHit]]]]:
    """The question's search: the bridge document first, then four that share none of its words."""
    bridge = chunk("zephyr", "The Zephyr Bridge was built by Arcadia Works in 1901.", 40)
    weak = [chunk(f"weak{i}", f"a lake, number {i}, lies far north.") for i in range(4)]
    return [[(QUESTION, [bridge, *weak])]]


def calls_of(reply: PolicyOutput | str) -> list[tuple[str, dict[str, Any]]]:
    assert isinstance(reply, PolicyOutput), reply
    return [(c.name, json.loads(c.arguments)) for c in reply.tool_calls]


def test_nothing_is_pruned_while_the_next_round_fits():
    """Room for another round under half the budget: every chunk stays in view, so a document
    that looks weak before its bridge is found can still be ranked once it is."""
    agent = HeuristicAgent(keep_docs=1)
    made = calls_of(agent(transcript(first_round(), used=3_000), 1))
    assert [name for name, _ in made] == [SEARCH_CORPUS]  # the bridge search, no prune
    assert made[0][1]["query"].startswith("Arcadia Works")


def test_only_the_weakest_chunks_the_next_round_needs_are_pruned():
    """Past the point where a round still fits, the weakest chunks go, just enough of them:
    14,000 used + 3 x 1,500 for the round leaves 2,116 over half the budget: three chunks of
    1,012 tokens (a chunk and its header line), not all four."""
    agent = HeuristicAgent(keep_docs=1)
    made = calls_of(agent(transcript(first_round(), used=14_000), 1))
    pruned = [args["chunk_ids"] for name, args in made if name == PRUNE_CHUNKS]
    assert pruned == [["weak0_0", "weak1_0", "weak2_0"]]


def test_the_agent_answers_when_pruning_cannot_make_room():
    """So full that even every weak chunk would not free a round's room: no hop, the answer."""
    agent = HeuristicAgent(keep_docs=1)
    reply = agent(transcript(first_round(), used=30_000), 1)
    assert isinstance(reply, str) and '<Document id="zephyr">' in reply
