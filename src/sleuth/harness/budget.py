"""Token budget: limits and the pure decisions the loop takes from them.

The policy's context is bounded by ``total`` (T). After every turn the last observation ends
with a usage line ``[Token usage: X/T]``. Past the soft threshold a message asks the policy to
prune or conclude; past the hard cutoff every tool but ``prune_chunks`` is refused. Tool output
is cut to what is left after keeping a reserve for the policy's next reply, so X never exceeds T.

Report defaults (context1-report §2.4): T = 32,768, soft = T/2, hard = T/2 + (T - T/2)/2,
S_budget = 4,096 tokens per call.
"""

from __future__ import annotations

from dataclasses import dataclass

from sleuth.errors import ConfigError
from sleuth.tools.spec import PRUNE

BUDGET_TOKENS = 32_768  # report §2.4: T_budget; the report's usage line reads X/32,768
PER_CALL_TOKENS = 4_096  # report §2.4: S_budget, the most one search or read may return
REPLY_RESERVE_TOKENS = 1_024  # ours: room always left for the policy's next reply
MIN_TOOL_TOKENS = 256  # ours: a call granted less than this is refused rather than starved
MAX_TURNS = 128  # report §2.1 (128-entry trajectory cap) and §5 (turn penalty ends at 128)


@dataclass(frozen=True)
class BudgetConfig:
    """Every token limit of one run; thresholds left as ``None`` follow the report's formulas."""

    total: int = BUDGET_TOKENS
    """T: the most tokens the policy is ever sent (report §2.4)."""
    soft_threshold: int | None = None
    """Above this the prune-or-conclude message is added; default T/2 (report §2.4)."""
    hard_cutoff: int | None = None
    """Above this only ``prune_chunks`` runs; default soft + (T - soft)/2 (report §2.4, H1c)."""
    per_call_tokens: int = PER_CALL_TOKENS
    """The most one tool call may return, before the per-turn share (report §2.4 S_budget)."""
    reply_reserve: int = REPLY_RESERVE_TOKENS
    """Tokens kept free for the policy's next reply; observations never eat into them."""
    min_tool_tokens: int = MIN_TOOL_TOKENS
    """A call that would get fewer tokens than this is refused with an error instead."""
    max_turns: int = MAX_TURNS
    """Policy calls per run before the run stops with ``max_turns`` (report §2.1)."""
    warn_at_soft: bool = True
    """Add the prune-or-conclude message past the soft threshold (the report shows it in
    training rollouts only; switch off to evaluate without it)."""

    def __post_init__(self) -> None:
        t = self.total
        soft = t // 2 if self.soft_threshold is None else self.soft_threshold
        hard = soft + (t - soft) // 2 if self.hard_cutoff is None else self.hard_cutoff
        object.__setattr__(self, "soft_threshold", soft)
        object.__setattr__(self, "hard_cutoff", hard)
        if not 0 < soft < hard <= t:
            raise ConfigError(
                f"need 0 < soft_threshold ({soft}) < hard_cutoff ({hard}) <= total ({t}); "
                "raise total or move the thresholds"
            )
        if self.reply_reserve < 1 or self.reply_reserve + self.min_tool_tokens >= t:
            raise ConfigError(
                f"reply_reserve ({self.reply_reserve}) + min_tool_tokens ({self.min_tool_tokens})"
                f" must be positive and below total ({t}); lower them or raise total"
            )
        if not 0 < self.min_tool_tokens <= self.per_call_tokens:
            raise ConfigError(
                f"need 0 < min_tool_tokens ({self.min_tool_tokens}) <= per_call_tokens "
                f"({self.per_call_tokens}); raise per_call_tokens"
            )
        if self.max_turns < 1:
            raise ConfigError(f"max_turns ({self.max_turns}) must be at least 1")

    @property
    def observation_limit(self) -> int:
        """The largest context we send, so the next reply still has ``reply_reserve`` tokens."""
        return self.total - self.reply_reserve

    @property
    def soft(self) -> int:
        assert self.soft_threshold is not None  # set in __post_init__
        return self.soft_threshold

    @property
    def hard(self) -> int:
        assert self.hard_cutoff is not None  # set in __post_init__
        return self.hard_cutoff


def usage_line(used: int, total: int) -> str:
    """The marker that ends the last observation of every turn."""
    return f"[Token usage: {used}/{total}]"


def soft_message(cfg: BudgetConfig) -> str:
    """Added above the soft threshold: prune what you no longer need, or conclude."""
    return (
        f"Your context is past {cfg.soft} of {cfg.total} tokens. Before searching further, "
        f"call {PRUNE.name} on every chunk that does not help answer the query (weigh each "
        "chunk's token count against its relevance), or stop and give your final answer. "
        f"Past {cfg.hard} tokens every tool except {PRUNE.name} is refused."
    )


def hard_rejection(used: int, cfg: BudgetConfig) -> str:
    """The error a refused call gets above the hard cutoff."""
    return (
        f"Token budget exceeded ({used}/{cfg.total} tokens, cutoff {cfg.hard}): this call was "
        f"not run. Use {PRUNE.name} to free context, or give your final answer."
    )


def no_room_error(used: int, cfg: BudgetConfig) -> str:
    """The error a call gets when the turn's output allowance cannot fit it."""
    return (
        f"Not enough context left for this call's output ({used}/{cfg.total} tokens, "
        f"{cfg.reply_reserve} reserved for your reply): it was not run. Make fewer calls, "
        "prune chunks, or give your final answer."
    )


def split_allowance(allowance: int, n_calls: int, cfg: BudgetConfig) -> list[int | None]:
    """Share one turn's output allowance among its calls, in call order.

    Every call gets the same share, capped at ``per_call_tokens``, so the shares never sum to
    more than ``allowance``. When an even share would fall under ``min_tool_tokens``, the first
    calls get ``min_tool_tokens`` each while it lasts and the rest get ``None`` (refused).

    Example::

        >>> split_allowance(10_000, 3, BudgetConfig())
        [3333, 3333, 3333]
    """
    if n_calls == 0:
        return []
    share = min(cfg.per_call_tokens, max(allowance, 0) // n_calls)
    if share >= cfg.min_tool_tokens:
        return [share] * n_calls
    fits = max(allowance, 0) // cfg.min_tool_tokens
    return [cfg.min_tool_tokens if i < fits else None for i in range(n_calls)]


def reply_tokens(used: int, cfg: BudgetConfig, cap: int | None = None) -> int:
    """The generation limit for the next reply: everything up to T, optionally capped."""
    room = max(cfg.total - used, 1)
    return min(room, cap) if cap else room
