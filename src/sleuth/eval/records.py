"""What an eval writes to disk, as typed records: ``run.json``, ``results.jsonl``, ``summary.json``.

Each is a pydantic model with ``schema_version``. Records are validated when they are written
and when they are read back (a resumed run, a report), and travel between the eval's functions as
these models. A query's ``metrics`` and ``reward`` are :class:`~sleuth.metrics.Metrics` and
:class:`~sleuth.reward.RewardTerms` widened where a fused record holds a mean over its rollouts
(turns and tokens, the share of floored rewards): :class:`QueryMetrics`, :class:`QueryReward`.
A file written with an older ``schema_version`` still loads; a newer one is refused with a
message that says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sleuth.errors import InputError
from sleuth.io import read_jsonl
from sleuth.metrics import Metrics
from sleuth.reward import RewardTerms

RECORD_SCHEMA_VERSION = 1
Scores = dict[str, float | int | None]
"""One group's aggregates by name: means, counts (``count``), ``reward/<term>`` means."""


class _Versioned(BaseModel):
    """A record with ``schema_version``; fields this version does not know are kept as they are."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = RECORD_SCHEMA_VERSION

    @field_validator("schema_version")
    @classmethod
    def _known(cls, v: int) -> int:
        if v > RECORD_SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v} is newer than supported {RECORD_SCHEMA_VERSION}; "
                "upgrade sleuth to read it"
            )
        return v


class RunInfo(_Versioned):
    """``run.json``: what is being run; a resumed run must match ``CHECKED``."""

    policy: str
    rollouts: int = Field(ge=1)
    fuse: str | None
    rrf_k: int = Field(ge=1)
    beta: float = Field(gt=0)


CHECKED = ("policy", "rollouts", "fuse", "rrf_k", "beta")  # must match to resume

# A fused record's behaviour fields are means over its rollouts, so a float where one run has an
# int; ``int | float`` keeps a single run's ints whole on disk. The override widens a field of
# the base model, which mypy flags as unsafe for writes; records are only read.


class QueryMetrics(Metrics):
    """One query's metrics: :class:`~sleuth.metrics.Metrics`, behaviour fields averaged over
    rollouts when fused (:data:`sleuth.eval.fusion.BEHAVIOUR`); unknown names are kept."""

    model_config = ConfigDict(extra="allow")

    turns: int | float  # type: ignore[assignment]
    tool_calls: int | float  # type: ignore[assignment]
    peak_tokens: int | float  # type: ignore[assignment]
    total_tokens: int | float  # type: ignore[assignment]


class QueryReward(RewardTerms):
    """One query's reward terms, averaged over rollouts when fused; ``floored`` is then the share
    of rollouts the ε floor lifted."""

    model_config = ConfigDict(extra="allow")

    floored: bool | float  # type: ignore[assignment]


class QueryRecord(_Versioned):
    """One line of ``results.jsonl``: one query's rollouts, scored (fused when several)."""

    task_id: str
    query: str
    hops: int
    domain: str
    source: str
    policy: str
    rollouts: int
    metrics: QueryMetrics
    reward: QueryReward
    final_docs: list[str]
    gold_doc_ids: list[str]
    trajectories: list[str]
    """Trajectory files, relative to the output folder when inside it."""
    stop_reasons: list[str | None]
    error: str | None = None
    """Set when every rollout failed."""
    turn_tool_calls: list[list[int]] = Field(default_factory=list)
    turn_tokens: list[list[int]] = Field(default_factory=list)


class EvalSummary(_Versioned):
    """``summary.json``: the run settings, then aggregates overall and by hops, domain, source."""

    policy: str
    rollouts: int
    fuse: str | None
    rrf_k: int
    beta: float
    overall: Scores
    by_hops: dict[str, Scores] = Field(default_factory=dict)
    by_domain: dict[str, Scores] = Field(default_factory=dict)
    by_source: dict[str, Scores] = Field(default_factory=dict)

    def group(self, name: str) -> dict[str, Scores]:
        """``by_hops``, ``by_domain`` or ``by_source`` by its name."""
        groups: dict[str, Scores] = getattr(self, name)
        return groups


Record = TypeVar("Record", bound=_Versioned)


def checked(model: type[Record], data: dict[str, Any], source: str) -> Record:
    """``data`` validated as ``model`` (unknown keys kept).

    Raises:
        InputError: ``data`` does not fit the model (names the file and the field).
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        raise InputError(f"{model.__name__} {where}: {first['msg']}", source=source) from exc


def read_records(path: Path) -> Iterator[QueryRecord]:
    """The records of a ``results.jsonl``, each checked as a :class:`QueryRecord`."""
    fix = "delete that line and rerun the same command to resume (its query runs again)"
    for n, record in enumerate(read_jsonl(path, fix=fix), start=1):
        try:
            yield checked(QueryRecord, record, str(path))
        except InputError as e:
            raise InputError(f"record {n}: {e}; {fix}") from None


def read_json_record(model: type[Record], path: Path) -> Record:
    """A ``run.json`` or ``summary.json``, checked as ``model``.

    Raises:
        InputError: not JSON, or not such a record.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {path.name} ({exc})", source=str(path)) from exc
    if not isinstance(data, dict):
        raise InputError(f"{path.name} is not a JSON object", source=str(path))
    return checked(model, data, str(path))
