"""The heuristic agent's hop rounds on hand-built transcripts: what it prunes and when, and which
names it searches (titles of unseen corpus documents first, text order on ties)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sleuth.harness.policy import PolicyOutput, assistant_message
from sleuth.index.graph import CorpusGraph
from sleuth.index.lexical import ChunkRow
from sleuth.policies.heuristic import HeuristicAgent, best_names
from sleuth.policies.scripted import call
from sleuth.ranking.selector import search_floor
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


TITLES = {  # the corpus: id -> title
    "zephyr": "Zephyr Bridge",
    "arcadia": "Arcadia Works (company)",
    "delta": "Delta Yard",
    "lake": "North Lake",
}
ZEPHYR = (
    "The Zephyr Bridge was designed by Ivo Brand. It was built by Arcadia Works near Delta Yard."
)


class StubSelector:
    """Orders documents as listed and looks titles up in a real graph of :data:`TITLES` plus
    untitled notes (100 documents), the first ``hub`` of which name Arcadia Works."""

    def __init__(self, order: list[str], hub: int = 0):
        rows = [ChunkRow(f"{d}_0", d, 0, f"{t} text.", 5, t) for d, t in TITLES.items()]
        for i in range(100 - len(rows)):
            text = "a note on Arcadia Works." if i < hub else "a plain note."
            rows.append(ChunkRow(f"note{i}_0", f"note{i}", 0, text, 5, ""))
        self.index = SimpleNamespace(graph=CorpusGraph.build(rows, {}))
        self.order = order

    def title(self, doc: str) -> str:
        return TITLES.get(doc, "")

    def floor(self) -> tuple[tuple[int, int], ...]:
        return search_floor(self.index)  # type: ignore[arg-type]

    def rank(self, question: str, docs: list[Any], searches: list[Any]) -> list[tuple[str, float]]:
        ids = [d.doc_id for d in docs]
        return [(d, 1.0 / (1 + self.order.index(d))) for d in self.order if d in ids]


def names_searched(agent: HeuristicAgent, shown: list[Any]) -> list[str]:
    made = calls_of(agent(transcript([[(QUESTION, shown)]], used=1_000), 1))
    return [args["query"] for name, args in made if name == SEARCH_CORPUS]


def test_a_name_that_titles_an_unseen_document_goes_first():
    """ "Ivo Brand" comes first in the text but titles nothing; "Arcadia Works" is the next link."""
    selector = StubSelector(["zephyr"])
    agent = HeuristicAgent(selector=selector, bridge_entities=1)  # type: ignore[arg-type]
    assert names_searched(agent, [chunk("zephyr", ZEPHYR, 40)])[0].startswith("Arcadia Works")
    plain = HeuristicAgent(selector=selector, bridge_entities=1, title_boost=1.0)  # type: ignore[arg-type]
    assert names_searched(plain, [chunk("zephyr", ZEPHYR, 40)])[0].startswith("Ivo Brand")


def test_a_title_that_many_documents_name_is_a_hub_not_a_link():
    """Arcadia Works named by 6 of 100 documents (over ``hub_share``): no boost, so it falls
    behind Delta Yard (a title) and Ivo Brand (first in the text)."""
    selector = StubSelector(["zephyr"], hub=5)
    agent = HeuristicAgent(selector=selector, name_floor=0.0)  # type: ignore[arg-type]
    queries = names_searched(agent, [chunk("zephyr", ZEPHYR, 40)])
    assert [q.split()[0] for q in queries] == ["Delta", "Ivo", "Arcadia"]
    wide = HeuristicAgent(selector=selector, hub_share=0.1, name_floor=0.0)  # type: ignore[arg-type]
    queries = names_searched(wide, [chunk("zephyr", ZEPHYR, 40)])
    assert [q.split()[0] for q in queries] == ["Arcadia", "Delta", "Ivo"]


def test_documents_past_the_best_three_give_only_titles_of_unseen_documents():
    """The 4th document names North Lake (a title) and Gus Hale (none): only the title counts."""
    selector = StubSelector(["zephyr", "p2", "p3", "p4"])
    agent = HeuristicAgent(selector=selector, bridge_entities=9, name_floor=0.0)  # type: ignore[arg-type]
    shown = [chunk("zephyr", ZEPHYR, 40), chunk("p2", "a page.", 5), chunk("p3", "a page.", 5)]
    queries = names_searched(agent, [*shown, chunk("p4", "Gus Hale swam in North Lake.", 9)])
    assert [q.split()[0] for q in queries] == ["Arcadia", "Delta", "Ivo", "North"]


def test_a_name_that_titles_only_seen_documents_is_not_searched():
    """Delta Yard is already in view: searching its name again spends a search on nothing."""
    selector = StubSelector(["zephyr", "delta"])
    agent = HeuristicAgent(selector=selector, bridge_entities=3, name_floor=0.0)  # type: ignore[arg-type]
    shown = [chunk("zephyr", ZEPHYR, 40), chunk("delta", "A yard by North Lake.", 20)]
    queries = names_searched(agent, shown)
    assert [q.split()[0] for q in queries] == ["Arcadia", "North", "Ivo"]
    assert not any(q.startswith("Delta Yard") for q in queries)


def test_without_a_selector_names_keep_their_text_order():
    """No index, no titles: the names of the best document in text order, as before."""
    queries = names_searched(HeuristicAgent(bridge_entities=2), [chunk("zephyr", ZEPHYR, 40)])
    assert [q.split()[0] for q in queries] == ["Ivo", "Arcadia"]


WEAK = [chunk(f"weak{i}", f"a lake, number {i}, lies far north.") for i in range(4)]


def test_a_round_that_must_prune_needs_a_title_of_an_unseen_document():
    """Room for the next round only by pruning (a chunk pruned is a document the final list can
    no longer rank): with no name that titles an unseen document (Ivo Brand titles nothing) the
    agent answers instead, neither searching nor pruning; with room to spare it searches him."""
    agent = HeuristicAgent(selector=StubSelector(["zephyr"]), keep_docs=1)  # type: ignore[arg-type]
    shown = [chunk("zephyr", "The Zephyr Bridge was designed by Ivo Brand.", 40), *WEAK]
    reply = agent(transcript([[(QUESTION, shown)]], used=14_000), 1)
    assert isinstance(reply, str) and '<Document id="zephyr">' in reply
    assert names_searched(agent, shown)[0].startswith("Ivo Brand")


def test_a_round_that_must_prune_and_has_a_title_to_follow_searches_as_before():
    """One title of an unseen document (Arcadia Works) is enough: the round runs with its usual
    names, untitled ones included, and prunes what it needs."""
    agent = HeuristicAgent(selector=StubSelector(["zephyr"]), keep_docs=1, name_floor=0.0)  # type: ignore[arg-type]
    shown = [chunk("zephyr", ZEPHYR, 40), *WEAK]
    made = calls_of(agent(transcript([[(QUESTION, shown)]], used=14_000), 1))
    queries = [args["query"].split()[0] for name, args in made if name == SEARCH_CORPUS]
    assert queries == ["Arcadia", "Delta", "Ivo"]
    assert any(name == PRUNE_CHUNKS for name, _ in made)


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.floats(0, 10), max_size=12))
def test_best_names_are_the_highest_scores_ties_in_first_seen_order(scores: dict[str, float]):
    chosen = best_names(scores, 3)
    assert len(chosen) == min(3, len(scores))
    rest = [n for n in scores if n not in chosen]
    assert all(scores[c] >= scores[r] for c in chosen for r in rest)
    for a, b in zip(chosen, chosen[1:], strict=False):
        tie = scores[a] == scores[b]
        assert scores[a] > scores[b] or (tie and list(scores).index(a) < list(scores).index(b))


def second_round() -> list[list[tuple[str, list[ChunkHit]]]]:
    """The question's search, then a first bridge round that searched Ivo Brand."""
    ivo = chunk("ivo", "Ivo Brand was an engineer.", 20)
    return [[(QUESTION, [chunk("zephyr", ZEPHYR, 40)])], [("Ivo Brand built", [ivo])]]


def searched(reply: PolicyOutput | str) -> list[str]:
    return [args["query"].split()[0] for name, args in calls_of(reply) if name == SEARCH_CORPUS]


def test_rounds_after_the_first_search_fewer_names():
    """The second bridge round searches ``later_bridges`` names, the ones a full round would
    search first; the first round still searches up to ``bridge_entities`` names."""
    selector = StubSelector(["zephyr", "ivo"])
    agent = HeuristicAgent(selector=selector, name_floor=0.0)  # type: ignore[arg-type]
    assert searched(agent(transcript(second_round(), used=2_000), 2)) == ["Arcadia", "Delta"]
    one = HeuristicAgent(selector=selector, later_bridges=1)  # type: ignore[arg-type]
    assert searched(one(transcript(second_round(), used=2_000), 2)) == ["Arcadia"]
    first = agent(transcript([second_round()[0]], used=2_000), 1)
    assert searched(first) == ["Arcadia", "Delta", "Ivo"]


def test_a_name_far_below_the_best_is_not_searched():
    """Ivo Brand (a mention, 1.0) beside two titles of unseen documents (3.0 each) is under half
    the best score: not searched. Without titles every name scores alike and all are searched."""
    selector = StubSelector(["zephyr"])
    agent = HeuristicAgent(selector=selector)  # type: ignore[arg-type]
    assert [q.split()[0] for q in names_searched(agent, [chunk("zephyr", ZEPHYR, 40)])] == [
        "Arcadia",
        "Delta",
    ]
    plain = HeuristicAgent(selector=selector, title_boost=1.0)  # type: ignore[arg-type]
    queries = names_searched(plain, [chunk("zephyr", ZEPHYR, 40)])
    assert [q.split()[0] for q in queries] == ["Ivo", "Arcadia", "Delta"]


def test_a_smaller_round_runs_only_where_a_full_round_would():
    """13,000 tokens used: a full round (3 x 1,500) would need room no weak chunk can free (Ivo
    Brand's page is rated 0.5), so the agent answers, although the two results of a later
    round would fit; with room for a full round the later round searches two names."""
    selector = StubSelector(["zephyr", "ivo"])
    agent = HeuristicAgent(selector=selector, keep_docs=1)  # type: ignore[arg-type]
    reply = agent(transcript(second_round(), used=13_000), 2)
    assert isinstance(reply, str) and '<Document id="zephyr">' in reply
    made = calls_of(agent(transcript(second_round(), used=11_000), 2))
    assert [name for name, _ in made] == [SEARCH_CORPUS, SEARCH_CORPUS]


def third_round() -> list[list[tuple[str, list[ChunkHit]]]]:
    """Two bridge rounds done: the second (Arcadia Works) showed only Arcadia's page."""
    first = [chunk("zephyr", ZEPHYR, 40), *(chunk(f"p{i}", "a page.", 5) for i in range(4))]
    arcadia = chunk("arcadia", "Arcadia Works was founded by Gus Hale in Delta Yard.", 20)
    ivo = chunk("ivo", "Ivo Brand was an engineer.", 20)
    return [[(QUESTION, first)], [("Ivo Brand built", [ivo])], [("Arcadia Works built", [arcadia])]]


def test_a_round_that_brings_nothing_into_the_top_five_is_the_last():
    """Arcadia's page, the second round's only new document, ranked sixth behind five earlier
    ones: the agent answers; ranked second, or with the rule off, a third round searches. The
    rule waits for ``settled_after`` rounds."""
    behind = StubSelector(["zephyr", "p0", "p1", "p2", "p3", "arcadia", "ivo"])
    reply = HeuristicAgent(selector=behind)(transcript(third_round(), used=3_000), 3)  # type: ignore[arg-type]
    assert isinstance(reply, str) and '<Document id="zephyr">' in reply
    early = HeuristicAgent(selector=behind)(transcript(third_round()[:2], used=3_000), 2)  # type: ignore[arg-type]
    assert searched(early)  # the first round's nothing new (Ivo, 7th) does not stop the second
    off = HeuristicAgent(selector=behind, settled_after=9)  # type: ignore[arg-type]
    assert searched(off(transcript(third_round(), used=3_000), 3))
    ahead = StubSelector(["zephyr", "arcadia", "p0", "p1", "p2", "p3", "ivo"])
    made = HeuristicAgent(selector=ahead)(transcript(third_round(), used=3_000), 3)  # type: ignore[arg-type]
    assert searched(made)[0] == "Delta"
