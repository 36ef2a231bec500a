"""The question's own top search hit keeps a place in the final top two unless the selector
clearly prefers another document there (``ranking.selector.keep_top_hit``).

On the Enron dev set the selector ranked four near-identical daily forex previews 0.91, 0.87,
0.82, 0.76 and put the one the question's search found first (the gold one) third.
"""

from __future__ import annotations

import math
import re

from hypothesis import given
from hypothesis import strategies as st

from sleuth.policies.heuristic import HeuristicAgent, question_top_hit
from sleuth.policies.transcript import ToolReply
from sleuth.ranking.selector import keep_top_hit
from sleuth.tools.spec import SEARCH_CORPUS
from sleuth.tools.types import ChunkHit

QUESTION = "What was the pound-dollar rate in the preview near 133.20?"
FOREX = [("mon", 0.912), ("tue", 0.870), ("wed", 0.816), ("thu", 0.759)]


def _logit(p: float) -> float:
    q = min(max(p, 1e-6), 1 - 1e-6)  # as the rule clips a probability of 0 or 1
    return math.log(q / (1 - q))


def test_a_near_tie_lets_the_top_hit_into_second_place():
    assert [d for d, _ in keep_top_hit(FOREX, "wed")] == ["mon", "wed", "tue", "thu"]


def test_a_clear_preference_keeps_the_selectors_order():
    ranked = [("a", 0.95), ("b", 0.90), ("c", 0.20)]
    assert keep_top_hit(ranked, "c") == ranked
    assert keep_top_hit(ranked, "c", margin=_logit(0.9) - _logit(0.2) + 0.01)[1] == ("c", 0.20)


def test_nothing_moves_without_a_top_hit_or_when_it_is_already_in_the_top_two():
    for hit in (None, "absent", "mon", "tue"):
        assert keep_top_hit(FOREX, hit) == FOREX


_DOCS = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.floats(0.0, 1.0)),
    max_size=10,
    unique_by=lambda x: x[0],
).map(lambda xs: sorted(xs, key=lambda x: -x[1]))


@given(_DOCS, st.sampled_from([*"abcdefghij", None]), st.floats(-1.0, 5.0))
def test_the_final_list_is_the_same_documents_with_at_most_the_top_hit_moved(ranked, hit, margin):
    out = keep_top_hit(ranked, hit, margin)
    assert sorted(out) == sorted(ranked)  # a permutation: nothing added, nothing lost
    rest = [x for x in out if x[0] != hit]
    assert rest == [x for x in ranked if x[0] != hit]  # the others keep their order
    docs = [d for d, _ in ranked]
    if hit in docs[2:]:
        p = dict(ranked)
        near = _logit(p[docs[1]]) - _logit(p[hit]) <= margin
        assert (out[1][0] == hit) is near
        assert out[0] == ranked[0]  # the selector's first stays first


def _search(query: str, docs: list[str], where: dict[str, str] | None = None) -> ToolReply:
    chunks = [ChunkHit(id=f"{d}_0", doc_id=d, text=f"text of {d}", tokens=5) for d in docs]
    arguments = {"query": query} | ({"where": where} if where else {})
    return ToolReply(SEARCH_CORPUS, arguments, chunks, 0)


class _Titles:
    def title(self, doc_id: str) -> str:
        return doc_id


def test_the_agent_keeps_the_whole_question_searchs_first_hit_in_its_top_two():
    seen = [
        _search(QUESTION, ["wed", "thu", "mon", "tue"], where={"from": "a@b.com"}),  # filtered
        _search("pound-dollar", ["mon", "tue"]),
        _search(QUESTION, ["wed", "mon", "tue", "thu"]),
    ]
    assert question_top_hit(QUESTION, seen) == "wed"
    assert question_top_hit("another question", seen) is None

    def order(agent: HeuristicAgent) -> list[str]:
        return re.findall(r'id="(\w+)"', agent.answer(QUESTION, FOREX, seen))

    assert order(HeuristicAgent(selector=_Titles())) == ["mon", "wed", "tue", "thu"]
    off = HeuristicAgent(selector=_Titles(), top_hit_margin=None)
    assert order(off) == ["mon", "tue", "wed", "thu"]
    assert order(HeuristicAgent()) == ["mon", "tue", "wed", "thu"]  # RRF order: no selector
