"""The SPEC §5 reward, term by term, against hand-computed values (sleuth.reward)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sleuth.harness.summary import RunSummary
from sleuth.reward import RewardConfig, compute_reward, prune_penalty, turn_penalty
from sleuth.tasks import Task

CFG = RewardConfig()
SEARCH, PRUNE, READ = "search_corpus", "prune_chunks", "read_document"


def make_task(**kw) -> Task:
    fields = {
        "id": "t1",
        "query": "capital of France?",
        "answer": "Paris",
        "gold_doc_ids": ["a", "b"],
    }
    return Task(**(fields | kw))


def test_defaults_match_the_report():
    assert (CFG.beta, CFG.w_f, CFG.w_traj, CFG.answer_bonus) == (4.0, 0.7, 0.3, 1.0)
    assert (CFG.prune_streak_free, CFG.prune_penalty_per_call, CFG.prune_penalty_cap) == (
        3,
        0.1,
        0.5,
    )
    assert (CFG.turn_penalty_start, CFG.turn_penalty_end, CFG.turn_penalty_max) == (64, 128, 0.5)
    assert CFG.epsilon == 0.01 and CFG.use_facts is True and CFG.credit_malformed_list is True


def test_perfect_run():
    seen = {"a_0": "Paris is the capital.", "b_0": "France."}
    summary = RunSummary(final_doc_ids=["a", "b"], seen_chunks=seen, turn_tools=[[SEARCH]])
    r = compute_reward(summary, make_task())
    assert (r.f_beta, r.trajectory_recall, r.answer_bonus) == (1.0, 1.0, 1.0)
    assert (r.prune_penalty, r.turn_penalty, r.floored) == (0.0, 0.0, False)
    assert r.pre_penalty == pytest.approx(2.0)
    assert r.total == pytest.approx(2.0)


def test_partial_run_without_answer():
    seen = {"a_0": "x", "b_0": "y"}
    r = compute_reward(RunSummary(final_doc_ids=["a", "c"], seen_chunks=seen), make_task())
    # P = R = 1/2 so F_4 = 1/2; both gold seen
    assert r.f_beta == pytest.approx(0.5)
    assert r.trajectory_recall == 1.0
    assert r.answer_bonus == 0.0
    assert r.total == pytest.approx(0.7 * 0.5 + 0.3)


@pytest.mark.parametrize(
    ("turns", "expected"), [(0, 0.0), (63, 0.0), (64, 0.0), (96, 0.25), (128, 0.5), (200, 0.5)]
)
def test_turn_penalty_ramp(turns, expected):
    assert turn_penalty(turns, CFG) == pytest.approx(expected)


def test_turn_penalty_at_exactly_128_turns_in_the_reward():
    seen = {"a_0": "x", "b_0": "y"}
    summary = RunSummary(final_doc_ids=["a", "b"], seen_chunks=seen, turn_tools=[[SEARCH]] * 128)
    r = compute_reward(summary, make_task())
    assert r.turn_penalty == pytest.approx(0.5)
    assert r.pre_penalty == pytest.approx(1.0)
    assert r.total == pytest.approx(0.5)
    at_64 = compute_reward(summary.model_copy(update={"turn_tools": [[SEARCH]] * 64}), make_task())
    assert at_64.turn_penalty == 0.0 and at_64.total == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("turn_tools", "expected"),
    [
        ([[PRUNE]] * 3, 0.0),  # a streak of 3 is free
        ([[PRUNE]] * 4, 0.1),  # the 4th prune turn's single call costs 0.1
        ([[PRUNE]] * 3 + [[PRUNE, PRUNE]], 0.2),  # every call of a late turn costs
        ([[PRUNE]] * 4 + [[SEARCH]] + [[PRUNE]] * 4, 0.2),  # two streaks of 4
        ([[PRUNE]] * 3 + [[SEARCH, PRUNE]] + [[PRUNE]], 0.0),  # a mixed turn breaks the streak
        ([[PRUNE]] * 3 + [[]] + [[PRUNE]] * 3, 0.0),  # so does a turn with no calls
        ([[PRUNE]] * 10, 0.5),  # 7 excess calls = 0.7, capped at 0.5
    ],
)
def test_prune_streak_penalty(turn_tools, expected):
    assert prune_penalty(turn_tools, CFG) == pytest.approx(expected)


def test_prune_penalty_is_subtracted_in_the_reward():
    seen = {"a_0": "x", "b_0": "y"}
    summary = RunSummary(final_doc_ids=["a", "b"], seen_chunks=seen, turn_tools=[[PRUNE]] * 4)
    r = compute_reward(summary, make_task())
    assert r.prune_penalty == pytest.approx(0.1)
    assert r.total == pytest.approx(1.0 - 0.1)


def test_floor_lifts_a_penalised_run_but_not_above_pre_penalty():
    # one gold of two seen, nothing returned: pre = 0.3 · 0.5 = 0.15; 128 turns: raw = -0.35
    summary = RunSummary(seen_chunks={"a_0": "x"}, turn_tools=[[SEARCH]] * 128)
    r = compute_reward(summary, make_task())
    assert r.pre_penalty == pytest.approx(0.15)
    assert r.total == pytest.approx(0.01) and r.floored is True
    high_floor = compute_reward(summary, make_task(), RewardConfig(epsilon=0.2))
    assert high_floor.total == pytest.approx(0.15)  # capped at r_pre, not lifted to 0.2


def test_floor_never_lifts_a_zero_run_above_zero():
    summary = RunSummary(turn_tools=[[SEARCH]] * 128)
    r = compute_reward(summary, make_task())
    assert r.pre_penalty == 0.0
    assert r.total == 0.0  # raw -0.5 is floored, and the floor is capped at r_pre = 0
    assert r.floored is True
    unpenalised = compute_reward(RunSummary(), make_task())
    assert unpenalised.total == 0.0 and unpenalised.floored is False


def test_failed_run_gets_no_floor():
    summary = RunSummary(
        seen_chunks={"a_0": "x"}, turn_tools=[[SEARCH]] * 128, error="endpoint down"
    )
    r = compute_reward(summary, make_task())
    assert r.total == pytest.approx(0.15 - 0.5)
    assert r.floored is False
    clean = compute_reward(summary.model_copy(update={"turn_tools": []}), make_task())
    assert clean.total == pytest.approx(0.15)


def test_fact_level_terms_are_used_when_the_task_has_groups():
    task = make_task(gold_doc_ids=["a"], gold_chunk_groups=[["a_0", "e_2"], ["b_1"]])
    summary = RunSummary(final_doc_ids=["e", "z"], seen_chunks={"b_1": "x", "z_0": "y"})
    r = compute_reward(summary, task)
    # fact recall 1/2, fact precision 1/2 (e of e, z), fact trajectory recall 1/2
    assert r.f_beta == pytest.approx(0.5)
    assert r.trajectory_recall == pytest.approx(0.5)
    assert r.total == pytest.approx(0.7 * 0.5 + 0.3 * 0.5)
    by_doc = compute_reward(summary, task, RewardConfig(use_facts=False))
    assert (by_doc.f_beta, by_doc.trajectory_recall) == (0.0, 0.0)
    assert by_doc.total == 0.0


def test_malformed_list_earns_nothing_when_not_credited():
    seen = {"a_0": "Paris is the capital.", "b_0": "y"}
    summary = RunSummary(final_doc_ids=["a"], seen_chunks=seen, malformed_answer=True)
    credited = compute_reward(summary, make_task())  # SPEC default: the salvaged list counts
    assert credited.f_beta > 0 and credited.answer_bonus == 1.0
    strict = compute_reward(summary, make_task(), RewardConfig(credit_malformed_list=False))
    assert (strict.f_beta, strict.answer_bonus) == (0.0, 0.0)
    assert strict.trajectory_recall == credited.trajectory_recall == 1.0
    assert strict.total == pytest.approx(0.3)
    well_formed = summary.model_copy(update={"malformed_answer": False})
    unaffected = compute_reward(well_formed, make_task(), RewardConfig(credit_malformed_list=False))
    assert unaffected.total == pytest.approx(credited.total)


def test_weights_and_beta_are_configurable():
    seen = {"a_0": "Paris", "b_0": "y"}
    summary = RunSummary(final_doc_ids=["a", "c"], seen_chunks=seen)
    cfg = RewardConfig(beta=1.0, w_f=1.0, w_traj=0.0, answer_bonus=0.5)
    r = compute_reward(summary, make_task(), cfg)
    assert r.f_beta == pytest.approx(0.5)
    assert r.answer_bonus == 0.5
    assert r.total == pytest.approx(1.0)


def test_bad_config_is_rejected():
    with pytest.raises(ValidationError):
        RewardConfig(turn_penalty_start=128, turn_penalty_end=64)
    with pytest.raises(ValidationError):
        RewardConfig(beta=0)


DOCS = ["a", "b", "c", "d"]
chunk_ids = st.builds(lambda d, i: f"{d}_{i}", st.sampled_from(DOCS), st.integers(0, 2))
turns = st.lists(st.lists(st.sampled_from([SEARCH, PRUNE, READ]), max_size=3), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    gold=st.lists(st.sampled_from(DOCS), min_size=1, max_size=3, unique=True),
    final=st.lists(st.sampled_from(DOCS + ["a_0", "z"]), max_size=6),
    seen=st.dictionaries(chunk_ids, st.sampled_from(["Paris", "nothing"]), max_size=6),
    turn_tools=turns,
    extra_turns=st.integers(0, 140),
    epsilon=st.sampled_from([0.0, 0.01, 0.2]),
)
def test_error_free_reward_lies_between_floor_and_pre_penalty(
    gold, final, seen, turn_tools, extra_turns, epsilon
):
    summary = RunSummary(
        final_doc_ids=final,
        seen_chunks=seen,
        pruned_chunk_ids=list(seen)[:2],
        turn_tools=turn_tools + [[SEARCH]] * extra_turns,
    )
    cfg = RewardConfig(epsilon=epsilon)
    r = compute_reward(summary, make_task(gold_doc_ids=gold), cfg)
    assert min(epsilon, r.pre_penalty) - 1e-12 <= r.total <= r.pre_penalty + 1e-12
    expected_pre = cfg.w_f * r.f_beta + cfg.w_traj * r.trajectory_recall + r.answer_bonus
    assert r.pre_penalty == pytest.approx(expected_pre)
    assert 0.0 <= r.prune_penalty <= 0.5 and 0.0 <= r.turn_penalty <= 0.5
