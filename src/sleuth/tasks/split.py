"""One fixed split of questions into a training side and a held-out side.

Everything sleuth trains or tunes on benchmark questions (the shipped ranker, the distilled
local policy) uses only the training side; every quality figure is measured on the held-out
side. The side of a question depends only on its id, so adding questions never moves one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from sleuth.tasks.schema import Task

SALT = "sleuth-split-v1"
T = TypeVar("T", bound=Task)


def is_heldout(task_id: str) -> bool:
    """Half of all ids, chosen by a salted hash."""
    digest = hashlib.sha1(f"{SALT}:{task_id}".encode()).digest()
    return digest[0] % 2 == 0


def split_tasks(tasks: Sequence[T]) -> tuple[list[T], list[T]]:
    """``(training side, held-out side)``, each in the input order."""
    train = [t for t in tasks if not is_heldout(t.id)]
    heldout = [t for t in tasks if is_heldout(t.id)]
    return train, heldout
