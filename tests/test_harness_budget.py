"""Budget arithmetic: report defaults, validation, per-turn shares (table-driven)."""

from __future__ import annotations

import pytest

from sleuth.harness.budget import (
    BudgetConfig,
    hard_rejection,
    reply_tokens,
    split_allowance,
    usage_line,
)


def test_report_defaults():
    cfg = BudgetConfig()
    assert (cfg.total, cfg.soft, cfg.hard) == (32_768, 16_384, 24_576)
    assert (cfg.per_call_tokens, cfg.max_turns) == (4_096, 128)
    assert cfg.observation_limit == 32_768 - cfg.reply_reserve


@pytest.mark.parametrize(
    ("kwargs", "soft", "hard"),
    [
        ({"total": 8000}, 4000, 6000),  # both thresholds follow T
        ({"total": 8000, "soft_threshold": 5000}, 5000, 6500),  # hard = soft + (T - soft)/2
        ({"total": 8000, "hard_cutoff": 7000}, 4000, 7000),  # explicit hard cutoff kept
    ],
)
def test_thresholds_follow_total(kwargs, soft, hard):
    cfg = BudgetConfig(**kwargs)
    assert (cfg.soft, cfg.hard) == (soft, hard)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"soft_threshold": 20_000, "hard_cutoff": 12_000}, "hard_cutoff"),  # hard below soft
        ({"hard_cutoff": 40_000}, "total"),  # hard above T
        ({"total": 1000, "reply_reserve": 900}, "reply_reserve"),  # reserve leaves no room
        ({"min_tool_tokens": 5000}, "per_call_tokens"),  # minimum above per-call cap
        ({"max_turns": 0}, "max_turns"),
    ],
)
def test_invalid_budgets_name_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BudgetConfig(**kwargs)


@pytest.mark.parametrize(
    ("allowance", "n", "expected"),
    [
        (10_000, 3, [3333, 3333, 3333]),  # even split
        (50_000, 2, [4096, 4096]),  # capped at per_call_tokens
        (600, 4, [256, 256, None, None]),  # share under the minimum: first calls get it
        (100, 2, [None, None]),  # no room at all
        (-50, 1, [None]),  # already over: refused
        (1000, 0, []),
    ],
)
def test_split_allowance(allowance, n, expected):
    shares = split_allowance(allowance, n, BudgetConfig())
    assert shares == expected
    assert sum(s for s in shares if s) <= max(allowance, 0)


def test_texts_and_reply_limit():
    cfg = BudgetConfig()
    assert usage_line(14_203, 32_768) == "[Token usage: 14203/32768]"
    assert "prune_chunks" in hard_rejection(25_000, cfg)
    assert reply_tokens(30_000, cfg) == 2_768
    assert reply_tokens(1_000, cfg, cap=4_096) == 4_096
