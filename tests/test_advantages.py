"""Group advantages, the zero-variance filter, the β anneal and the hop curriculum."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sleuth.train import (
    beta_schedule,
    curriculum_max_hops,
    filter_constant_groups,
    group_advantages,
    is_constant_group,
)

rewards = st.lists(st.floats(0.0, 2.0), min_size=2, max_size=16)


def test_group_advantages_by_hand():
    # mean 2, population std sqrt(2/3)
    s = (2 / 3) ** 0.5
    assert group_advantages([1.0, 2.0, 3.0], eps=0.0) == pytest.approx([-1 / s, 0.0, 1 / s])
    assert group_advantages([1.0, 2.0, 3.0], normalize_std=False) == pytest.approx([-1, 0, 1])
    assert group_advantages([0.4] * 8) == [0.0] * 8  # no NaN from a zero std
    assert group_advantages([]) == []


@given(rewards)
def test_group_advantages_are_centred_and_unit_scaled(rewards_G):
    assume(not is_constant_group(rewards_G, tol=1e-3))
    adv_G = group_advantages(rewards_G, eps=0.0)
    assert sum(adv_G) == pytest.approx(0.0, abs=1e-6)
    assert statistics.pstdev(adv_G) == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize(
    ("rewards_G", "constant"),
    [
        ([0.5] * 8, True),  # identical
        ([0.5, 0.5 + 5e-7, 0.5 - 4e-7], True),  # float noise within the tolerance
        ([0.5, 0.5 + 1e-3], False),  # a real difference
        ([0.0, 0.0, 0.0, 1.0], False),  # one success among failures
        ([0.7], True),  # one rollout carries no contrast
        ([], True),
    ],
)
def test_is_constant_group(rewards_G, constant):
    assert is_constant_group(rewards_G) is constant


def test_filter_drops_groups_within_tolerance_and_keeps_the_rest():
    groups_P = [[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.3, 0.3 + 5e-7], [0.2, 0.9]]
    kept_P, dropped = filter_constant_groups(groups_P)
    assert kept_P == [[0.0, 1.0, 0.0], [0.2, 0.9]] and dropped == 2
    # a looser tolerance drops more
    assert filter_constant_groups([[0.30, 0.31], [0.1, 0.9]], tol=0.05) == ([[0.1, 0.9]], 1)


def test_filter_reads_rewards_from_any_group_type():
    groups_P = [{"id": "a", "rewards": [0.2, 0.2]}, {"id": "b", "rewards": [0.2, 0.8]}]
    kept_P, dropped = filter_constant_groups(groups_P, rewards_of=lambda g: g["rewards"])
    assert [g["id"] for g in kept_P] == ["b"] and dropped == 1


def test_beta_schedule_anneals_from_4_to_2():
    assert beta_schedule(0, 5) == 4.0
    assert beta_schedule(4, 5) == 2.0
    assert beta_schedule(2, 5) == pytest.approx(3.0)
    assert beta_schedule(9, 5) == 2.0  # past the last epoch it stays at the end value
    assert beta_schedule(0, 1) == 4.0
    with pytest.raises(ValueError, match="n_epochs"):
        beta_schedule(0, 0)


@given(st.integers(1, 50), st.integers(0, 60), st.integers(0, 60))
def test_beta_schedule_never_rises_and_stays_in_range(n_epochs, a, b):
    lo, hi = sorted((a, b))
    assert 2.0 <= beta_schedule(hi, n_epochs) <= beta_schedule(lo, n_epochs) <= 4.0


def test_curriculum_raises_hops_phase_by_phase():
    hops = [curriculum_max_hops(step, 9) for step in range(11)]
    assert hops == [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]
    assert curriculum_max_hops(0, 4, phases=(2, 4)) == 2
    assert curriculum_max_hops(2, 4, phases=(2, 4)) == 4
    with pytest.raises(ValueError, match="non-decreasing"):
        curriculum_max_hops(0, 4, phases=(3, 1))
    with pytest.raises(ValueError, match="n_steps"):
        curriculum_max_hops(0, 0)


@given(
    st.integers(1, 300),
    st.lists(st.integers(1, 6), min_size=1, max_size=5).map(sorted),
    st.integers(0, 400),
    st.integers(0, 400),
)
def test_curriculum_is_monotone_and_spans_all_phases(n_steps, phases, a, b):
    lo, hi = sorted((a, b))
    assert curriculum_max_hops(lo, n_steps, phases) <= curriculum_max_hops(hi, n_steps, phases)
    assert curriculum_max_hops(0, n_steps, phases) == phases[0]
    if n_steps >= len(phases):  # enough steps to reach the last phase
        assert curriculum_max_hops(n_steps - 1, n_steps, phases) == phases[-1]
