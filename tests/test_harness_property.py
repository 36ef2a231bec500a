"""Property: over random searches and prunes, every request shows exactly the chunks seen and
not pruned, never a pruned chunk's text, and never more than T tokens."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.harness.budget import BudgetConfig
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.policies import ScriptedPolicy, call, turn
from tests.fakes import FakeTools

HEADER = re.compile(r"# DOCUMENT ID: (\S+)")
USAGE = re.compile(r"\[Token usage: (\d+)/(\d+)\]$")
BUDGET = BudgetConfig(total=2600, reply_reserve=200, per_call_tokens=300, min_tool_tokens=40)
ANSWER = '<Document id="d0"><Justification>x</Justification></Document>'

searches = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=3).map(lambda q: ("s", q))
prunes = st.tuples(st.lists(st.integers(0, 40), max_size=6), st.booleans()).map(lambda p: ("p", p))
steps = st.lists(st.one_of(searches, prunes), min_size=1, max_size=12)


def policy_for(plan):
    def step(messages, index):
        if index >= len(plan):
            return ANSWER
        kind, arg = plan[index]
        if kind == "s":
            return turn(*(call("search_corpus", query=q * (index + 1)) for q in arg))
        visible = [i for m in messages[2:] for i in HEADER.findall(m.get("content") or "")]
        picks, with_unknown = arg
        ids = [visible[p % len(visible)] for p in picks] if visible else []
        return turn(call("prune_chunks", chunk_ids=ids + (["never_0"] if with_unknown else [])))

    return ScriptedPolicy(step)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_view_matches_seen_minus_pruned_and_stays_in_budget(plan):
    tools = FakeTools(n_docs=15)
    policy = policy_for(plan)
    trajectory = Harness(tools, policy, HarnessConfig(budget=BUDGET)).run("q")
    assert trajectory.stop_reason in {"answered", "max_turns", "budget_exhausted"}
    shown: set[str] = set()
    pruned: set[str] = set()
    for t in trajectory.turns:
        contents = [m.get("content") or "" for m in t.messages]
        present = [i for c in contents[2:] for i in HEADER.findall(c)]
        assert len(present) == len(set(present))  # each chunk shown once
        assert set(present) == shown - pruned
        for chunk_id in pruned:
            assert all(tools.chunks[chunk_id].text not in c for c in contents)
        assert t.prompt_tokens <= BUDGET.total
        assert t.prompt_tokens == policy.count_tokens(t.messages, trajectory.tool_schemas)
        if t.index > 0:
            assert USAGE.search(contents[-1]).groups() == (str(t.prompt_tokens), "2600")
        for event in t.tool_events:
            shown.update(event.shown_ids)
            if event.prune:
                pruned.update(event.prune.pruned)
                assert "never_0" not in event.prune.pruned
