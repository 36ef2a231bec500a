"""A model drives the search and the learned selector writes the final list
(:mod:`sleuth.policies.selecting`): tool turns pass through, the answer is re-ordered over
everything in view, and an answer with nothing in view stands."""

from __future__ import annotations

import json
import re

import pytest

from sleuth.errors import InputError
from sleuth.harness import load_trajectory, run_query
from sleuth.index import Index
from sleuth.policies import ScriptedPolicy, build_policy
from sleuth.policies.heuristic import HeuristicAgent, trail
from sleuth.policies.scripted import call, turn
from sleuth.policies.selecting import SelectedFinalList
from sleuth.policies.spec import ADAPTER_SETTINGS, PolicyOptions
from sleuth.policies.transcript import final_answer, observations, query_of
from sleuth.ranking.model import load_ranker
from sleuth.ranking.selector import Selector
from sleuth.tools.spec import SEARCH_CORPUS
from sleuth.tools.toolbox import Toolbox
from sleuth.train.tiny import build_tiny_model

QUESTION = "capital of Germany"


@pytest.fixture(scope="module")
def tools(small_index) -> Toolbox:
    return Toolbox(Index.open(small_index), ranker=load_ranker(None))


def _run(tools: Toolbox, script, tmp_path, final_docs: int = 5):
    inner = ScriptedPolicy(script)
    selector = Selector(tools.index, tools.ranker)
    policy = SelectedFinalList(inner, selector, final_docs)
    result = run_query(tools, QUESTION, policy=policy, trajectory=tmp_path / "t.jsonl")
    return inner, selector, result


def test_the_selector_reorders_the_models_answer_over_everything_in_view(tools, tmp_path):
    script = [turn(call(SEARCH_CORPUS, query=QUESTION)), final_answer([("paris", "a guess")])]
    inner, selector, result = _run(tools, script, tmp_path)
    assert [c["function"]["name"] for c in inner.requests[1][-2]["tool_calls"]] == [SEARCH_CORPUS]
    last = inner.requests[-1]  # what the model saw when it answered
    docs, searches = trail(observations(last), selector.title)
    expected = [doc for doc, _ in selector.rank(query_of(last), docs, searches)]
    assert sorted(expected) == ["berlin", "paris"]  # both documents were in view
    assert [d.id for d in result.documents] == expected  # not the model's one-document list
    assert load_trajectory(result.trajectory).policy == "scripted+selector"


def test_the_list_is_cut_to_final_docs(tools, tmp_path):
    script = [turn(call(SEARCH_CORPUS, query=QUESTION)), final_answer([("paris", "a guess")])]
    _, _, result = _run(tools, script, tmp_path, final_docs=1)
    assert len(result.documents) == 1


def test_an_answer_with_nothing_in_view_stands(tools, tmp_path):
    _, _, wrapped = _run(tools, ["Nothing found."], tmp_path)
    alone = run_query(
        tools, QUESTION, policy=ScriptedPolicy(["Nothing found."]), trajectory=tmp_path / "a.jsonl"
    )
    assert wrapped.documents == alone.documents == []
    assert wrapped.stop_reason == alone.stop_reason


def test_local_models_take_the_selector_when_asked(tmp_path, small_index):
    tiny = build_tiny_model(tmp_path / "tiny", seed=0)
    plain = Toolbox(Index.open(small_index))
    for final_list, wrapped in (("selector", True), ("model", False), (None, False)):
        built = build_policy(
            f"local:{tiny}", PolicyOptions(engine="transformers", final_list=final_list)
        )
        _, factory = built.for_tools(plain)
        assert isinstance(factory(0), SelectedFinalList) is wrapped
    with pytest.raises(InputError, match="unknown final list"):
        PolicyOptions(final_list="teacher")


def test_an_adapter_naming_an_unknown_final_list_is_refused(tmp_path):
    tiny = build_tiny_model(tmp_path / "tiny", seed=0)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / ADAPTER_SETTINGS).write_text(json.dumps({"final_list": "teacher"}))
    with pytest.raises(InputError, match="final_list 'teacher' unknown"):
        build_policy(f"local:{tiny}", PolicyOptions(engine="transformers", adapter=str(adapter)))


def test_justifications_quote_the_sentence_closest_to_the_question(tools, tmp_path):
    script = [turn(call(SEARCH_CORPUS, query=QUESTION)), final_answer([("paris", "a guess")])]
    _, _, result = _run(tools, script, tmp_path)
    texts = {
        "berlin": "Berlin is the capital of Germany.",
        "paris": "Paris is the capital of France.",
    }
    for rank, doc in enumerate(result.documents, start=1):
        assert doc.justification == (
            f'"{texts[doc.id]}" Ranked {rank} by learned selection over 1 searches.'
        )


def test_quotes_can_be_left_out(tools, tmp_path):
    agent = HeuristicAgent(selector=Selector(tools.index, tools.ranker), quote_evidence=False)
    result = run_query(
        tools, QUESTION, policy=ScriptedPolicy(agent), trajectory=tmp_path / "q.jsonl"
    )
    assert result.documents and all(
        re.fullmatch(rf"Ranked {d.rank} by learned selection over \d+ searches\.", d.justification)
        for d in result.documents
    )
