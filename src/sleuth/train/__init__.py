"""Training: sequences from trajectories, group advantages and the CISPO loss (SPEC §6).

The names below load their module on first use (PEP 562), so importing a torch-free module of
this package (``sleuth.train.constants``, which the CLI reads) does not load torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from sleuth.train.constants import CISPO_W_MAX, CISPO_W_MIN

if TYPE_CHECKING:
    from sleuth.train.advantages import (
        beta_schedule,
        curriculum_max_hops,
        filter_constant_groups,
        group_advantages,
        is_constant_group,
    )
    from sleuth.train.cispo import cispo_loss, token_entropy
    from sleuth.train.sequences import (
        SequenceBatch,
        TrainSequence,
        collate_sequences,
        sequence_logprobs,
        turns_to_sequences,
    )

_MODULE_OF = {
    "beta_schedule": "advantages",
    "curriculum_max_hops": "advantages",
    "filter_constant_groups": "advantages",
    "group_advantages": "advantages",
    "is_constant_group": "advantages",
    "cispo_loss": "cispo",
    "token_entropy": "cispo",
    "SequenceBatch": "sequences",
    "TrainSequence": "sequences",
    "collate_sequences": "sequences",
    "sequence_logprobs": "sequences",
    "turns_to_sequences": "sequences",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"sleuth.train.{module}"), name)


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
