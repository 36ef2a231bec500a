"""Training: sequences from trajectories, group advantages and the CISPO loss (SPEC §6)."""

from sleuth.train.advantages import (
    beta_schedule,
    curriculum_max_hops,
    filter_constant_groups,
    group_advantages,
    is_constant_group,
)
from sleuth.train.cispo import CISPO_W_MAX, CISPO_W_MIN, cispo_loss, token_entropy
from sleuth.train.sequences import (
    SequenceBatch,
    TrainSequence,
    collate_sequences,
    sequence_logprobs,
    turns_to_sequences,
)

__all__ = [
    "CISPO_W_MAX",
    "CISPO_W_MIN",
    "SequenceBatch",
    "TrainSequence",
    "beta_schedule",
    "cispo_loss",
    "collate_sequences",
    "curriculum_max_hops",
    "filter_constant_groups",
    "group_advantages",
    "is_constant_group",
    "sequence_logprobs",
    "token_entropy",
    "turns_to_sequences",
]
