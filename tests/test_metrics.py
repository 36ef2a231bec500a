"""Per-trajectory metrics against hand-computed values (sleuth.metrics)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleuth.harness.summary import RunSummary
from sleuth.metrics import (
    Metrics,
    aggregate,
    compute_metrics,
    f_beta,
    final_doc_list,
    normalize_answer,
    recall_at,
)
from sleuth.tasks import Task


def make_task(**kw) -> Task:
    fields = {
        "id": "t1",
        "query": "capital of France?",
        "answer": "Paris",
        "gold_doc_ids": ["a", "b"],
    }
    return Task(**(fields | kw))


SEEN = {"a_0": "The capital of France is Paris.", "b_1": "France is in Europe.", "c_0": "Lyon."}


def test_document_level_scores_by_hand():
    summary = RunSummary(final_doc_ids=["a_0", "c", "a", "d"], seen_chunks=SEEN)
    m = compute_metrics(summary, make_task(), beta=4.0)
    # final docs [a, c, d]: 1 of 2 gold, 1 of 3 returned
    assert m.final_docs == 3
    assert m.recall == pytest.approx(1 / 2)
    assert m.precision == pytest.approx(1 / 3)
    assert m.f1 == pytest.approx(0.4)  # 2PR/(P+R) = (1/3)/(5/6)
    assert m.f_beta == pytest.approx(17 / 35)  # 17·(1/6) / (16/3 + 1/2)
    assert m.beta == 4.0
    assert m.trajectory_recall == 1.0
    assert m.final_answer_found is True
    assert m.fact_recall is None and m.fact_trajectory_recall is None


def test_empty_final_list_scores_zero_even_if_answer_was_seen():
    m = compute_metrics(RunSummary(final_doc_ids=[], seen_chunks=SEEN), make_task())
    assert (m.recall, m.precision, m.f1, m.f_beta, m.final_docs) == (0.0, 0.0, 0.0, 0.0, 0)
    assert m.final_answer_found is False
    assert m.trajectory_recall == 1.0


def test_duplicate_ids_in_final_list_count_once():
    summary = RunSummary(final_doc_ids=["a", "a", "a_1", "b", "b_0"], seen_chunks=SEEN)
    m = compute_metrics(summary, make_task())
    assert final_doc_list(summary.final_doc_ids) == ["a", "b"]
    assert (m.recall, m.precision, m.final_docs) == (1.0, 1.0, 2)


def test_recall_at_k_by_hand():
    # final documents (deduplicated): x a y z w b v u t s c  ->  gold a at 2, b at 6, c at 11
    final = ["x", "a_0", "a", "y", "z", "w_1", "b", "v", "u", "t", "s", "c"]
    m = compute_metrics(RunSummary(final_doc_ids=final), make_task(gold_doc_ids=["a", "b", "c"]))
    assert m.recall_at_2 == pytest.approx(1 / 3)  # a
    assert m.recall_at_5 == pytest.approx(1 / 3)  # a (b is 6th)
    assert m.recall_at_10 == pytest.approx(2 / 3)  # a, b (c is 11th)
    assert m.recall == 1.0  # the whole list
    assert m.all_gold_at_5 is False


def test_all_gold_at_5_needs_every_gold_document_in_the_first_five():
    hit = RunSummary(final_doc_ids=["b_0", "x", "b_2", "y", "z", "a"])  # a is 5th once deduped
    assert compute_metrics(hit, make_task()).all_gold_at_5 is True
    assert compute_metrics(hit, make_task()).recall_at_2 == 0.5
    miss = RunSummary(final_doc_ids=["b", "x", "y", "z", "w", "a"])  # a is 6th
    m = compute_metrics(miss, make_task())
    assert (m.all_gold_at_5, m.recall_at_5, m.recall_at_10) == (False, 0.5, 1.0)


def test_recall_at_k_without_gold_or_answer_is_zero():
    no_gold = compute_metrics(RunSummary(final_doc_ids=["a"]), make_task(gold_doc_ids=[]))
    assert (no_gold.recall_at_2, no_gold.recall_at_10, no_gold.all_gold_at_5) == (0.0, 0.0, False)
    empty = compute_metrics(RunSummary(), make_task())
    assert (empty.recall_at_5, empty.all_gold_at_5) == (0.0, False)


ids = st.sampled_from(list("abcdefghij"))


@given(final=st.lists(ids, max_size=15), gold=st.lists(ids, min_size=1, max_size=4, unique=True))
def test_recall_at_k_grows_with_k_and_reaches_recall(final, gold):
    m = compute_metrics(RunSummary(final_doc_ids=final), make_task(gold_doc_ids=gold))
    assert 0.0 <= m.recall_at_2 <= m.recall_at_5 <= m.recall_at_10 <= m.recall <= 1.0
    assert m.all_gold_at_5 is (m.recall_at_5 == 1.0)
    distinct = final_doc_list(final)
    assert recall_at(distinct, gold, len(distinct)) == m.recall
    if len(distinct) <= 10:
        assert m.recall_at_10 == m.recall


def test_nothing_pruned_gives_undefined_prune_accuracy():
    assert compute_metrics(RunSummary(seen_chunks=SEEN), make_task()).prune_accuracy is None
    unknown_only = RunSummary(seen_chunks=SEEN, pruned_chunk_ids=["zzz_0"])
    assert compute_metrics(unknown_only, make_task()).prune_accuracy is None


def test_all_gold_pruned_then_refound():
    seen = {"a_0": "x", "a_1": "Paris", "b_0": "y", "c_0": "z"}
    summary = RunSummary(
        final_doc_ids=["a", "b"], seen_chunks=seen, pruned_chunk_ids=["a_0", "b_0", "c_0"]
    )
    m = compute_metrics(summary, make_task())
    assert m.prune_accuracy == pytest.approx(1 / 3)  # only c_0 was a good prune
    assert (m.recall, m.precision, m.trajectory_recall) == (1.0, 1.0, 1.0)
    assert m.final_answer_found is True  # a_1 was seen and a is in the final list
    assert m.pruned_chunks == 3


def test_prune_accuracy_counts_gold_group_chunks_and_repeats_once():
    task = make_task(gold_doc_ids=["a"], gold_chunk_groups=[["x_3"]])
    seen = {"x_3": "fact", "x_4": "noise", "c_0": "noise"}
    summary = RunSummary(seen_chunks=seen, pruned_chunk_ids=["x_3", "x_4", "c_0", "c_0"])
    m = compute_metrics(summary, task)
    assert m.prune_accuracy == pytest.approx(2 / 3)
    assert m.pruned_chunks == 3


def test_answer_must_be_in_a_seen_chunk_of_a_final_document():
    summary = RunSummary(final_doc_ids=["b"], seen_chunks=SEEN)  # Paris only in a_0
    assert compute_metrics(summary, make_task()).final_answer_found is False
    unseen_final = RunSummary(final_doc_ids=["a"], seen_chunks={"b_1": "Paris"})
    assert compute_metrics(unseen_final, make_task()).final_answer_found is False


@pytest.mark.parametrize(
    ("answer", "aliases", "text", "found"),
    [
        ("The Beatles", [], "beatles, the band from Liverpool", True),
        ("1955", [], "born in 19556 BC", False),
        ("Galați", [], "the port of Galati on the Danube", True),
        ("Gesellschaft", ["GmbH"], "a G.m.b.H.? no: a gmbh company", True),
        ("Paris", ["City of Light"], "nothing here", False),
    ],
)
def test_answer_matching_is_normalised_on_word_boundaries(answer, aliases, text, found):
    task = make_task(answer=answer, answer_aliases=aliases)
    summary = RunSummary(final_doc_ids=["a"], seen_chunks={"a_0": text})
    assert compute_metrics(summary, task).final_answer_found is found


def test_yes_no_answer_needs_every_gold_document():
    task = make_task(answer="Yes")
    seen = {"a_0": "yes", "b_0": "no"}
    partial = RunSummary(final_doc_ids=["a"], seen_chunks=seen)
    complete = RunSummary(final_doc_ids=["c", "b", "a"], seen_chunks=seen)
    assert compute_metrics(partial, task).final_answer_found is False
    assert compute_metrics(complete, task).final_answer_found is True


def test_normalize_answer():
    assert normalize_answer("  The Eiffel-Tower!  ") == "eiffel tower"
    assert normalize_answer("Małgorzata BRAUNEK") == "małgorzata braunek"
    assert normalize_answer("Galați") == "galati"
    assert normalize_answer("A an THE") == ""


def test_fact_level_variants():
    task = make_task(gold_doc_ids=["a"], gold_chunk_groups=[["a_0", "e_2"], ["b_1"]])
    seen = {"b_1": "x", "z_0": "y", "e_0": "z"}
    m = compute_metrics(RunSummary(final_doc_ids=["e", "z"], seen_chunks=seen), task)
    # output: group 1 via doc e, group 2 (doc b) missing; relevant docs {a, e, b}: e of [e, z]
    assert m.fact_recall == 0.5
    assert m.fact_precision == 0.5
    assert m.fact_f1 == pytest.approx(0.5)
    assert m.fact_f_beta == pytest.approx(0.5)
    # trajectory: a_0/e_2 never seen (e_0 is another chunk), b_1 seen
    assert m.fact_trajectory_recall == 0.5
    assert (m.recall, m.trajectory_recall) == (0.0, 0.0)


def test_behaviour_fields_pass_through():
    summary = RunSummary(
        turn_tools=[["search_corpus", "grep_corpus"], ["prune_chunks"], []],
        peak_tokens=900,
        total_tokens=2500,
        wall_time_s=1.5,
        malformed_answer=True,
        error="boom",
    )
    m = compute_metrics(summary, make_task())
    assert (m.turns, m.tool_calls, m.tool_calls_per_turn) == (3, 3, 1.0)
    assert (m.peak_tokens, m.total_tokens, m.wall_time_s) == (900, 2500, 1.5)
    assert m.malformed is True and m.failed is True
    assert compute_metrics(RunSummary(), make_task()).tool_calls_per_turn == 0.0


def test_task_without_gold_gets_no_recall_credit():
    m = compute_metrics(
        RunSummary(final_doc_ids=["a"], seen_chunks=SEEN), make_task(gold_doc_ids=[])
    )
    assert (m.recall, m.trajectory_recall, m.precision) == (0.0, 0.0, 0.0)


def test_f_beta_by_hand():
    assert f_beta(0.5, 0.5, 4.0) == pytest.approx(0.5)
    assert f_beta(1.0, 0.5, 4.0) == pytest.approx(8.5 / 16.5)
    assert f_beta(1.0, 0.5, 1.0) == pytest.approx(2 / 3)
    assert f_beta(0.0, 0.0, 4.0) == 0.0


unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(p=unit, r1=unit, r2=unit, beta=st.floats(min_value=0.1, max_value=10.0))
def test_f_beta_monotone_in_recall_at_fixed_precision(p, r1, r2, beta):
    lo, hi = sorted((r1, r2))
    assert f_beta(p, lo, beta) <= f_beta(p, hi, beta) + 1e-12


def _metrics(**kw) -> Metrics:
    base = compute_metrics(RunSummary(), make_task())
    return base.model_copy(update=kw)


def test_aggregate_means_over_defined_values():
    runs = [
        _metrics(recall=1.0, final_answer_found=True, prune_accuracy=None, turns=4),
        _metrics(recall=0.5, final_answer_found=False, prune_accuracy=0.5, turns=7),
    ]
    runs[0] = runs[0].model_copy(update={"recall_at_5": 1.0, "all_gold_at_5": True})
    agg = aggregate(runs)
    assert agg["count"] == 2
    assert agg["recall"] == 0.75
    assert (agg["recall_at_5"], agg["all_gold_at_5"]) == (0.5, 0.5)
    assert agg["final_answer_found"] == 0.5
    assert agg["prune_accuracy"] == 0.5
    assert agg["turns"] == 5.5
    assert agg["fact_recall"] is None


def test_aggregate_of_nothing():
    agg = aggregate([])
    assert agg["count"] == 0
    assert agg["recall"] is None
