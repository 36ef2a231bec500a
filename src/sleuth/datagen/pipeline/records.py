"""The pipeline's task record and its directory store.

A record is one task in the making. Its ``stages`` map holds an explicit status per stage
(``pending``, ``passed``, ``failed`` or ``error``) with a reason and a time, so a stage never
infers what happened from which fields happen to exist. ``failed`` is a verdict (the task is
dropped); ``error`` is an accident (an exception, an endpoint outage) and is retried.

The store keeps one JSON file per record, each written with an atomic replace. A stage takes the
records whose previous stage passed and whose own status is ``pending`` or ``error``, and saves
each record as soon as it is done, so an interrupted stage loses at most the record in flight
and a rerun neither repeats finished records nor creates duplicates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sleuth.datagen.evidence import QuoteEvidence
from sleuth.errors import InputError
from sleuth.io import atomic_write_text
from sleuth.tasks import Task

RECORD_SCHEMA_VERSION = 1
STAGES = ("explore", "verify", "distract", "extend", "expand")
"""Stage order; each stage runs on records whose previous stage passed."""

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class Status(StrEnum):
    PENDING = "pending"
    PASSED = "passed"
    FAILED = "failed"
    """A verdict: the record is dropped from later stages."""
    ERROR = "error"
    """An accident: the stage retries this record on its next run."""


class StageState(BaseModel):
    status: Status = Status.PENDING
    reason: str = ""
    at: str | None = None
    """ISO time of the last status change."""


class SupportingDoc(BaseModel):
    doc_id: str
    fact: str = ""
    """What the author says this document contributes (not trusted; verification checks)."""


class Bridge(BaseModel):
    """How a later hop hangs on an earlier one."""

    doc_id: str
    """The bridging document (also the first supporting document of its hop)."""
    from_hop: int
    from_doc_id: str
    """The earlier hop's document that shares the bridging fact."""
    shared_fact: str
    """A string that occurs in both documents (checked deterministically)."""


class Hop(BaseModel):
    """One hop of a task: clues, a question and the answer they lead to."""

    clues: list[str]
    question: str
    answer: str
    answer_aliases: list[str] = Field(default_factory=list)
    truth_type: str
    supporting: list[SupportingDoc]
    bridge: Bridge | None = None
    evidence: dict[str, list[QuoteEvidence]] = Field(default_factory=dict)
    """Verified quotes per supporting document (filled by verification)."""
    distractors: list[str] = Field(default_factory=list)
    rejected_distractors: dict[str, str] = Field(default_factory=dict)
    """Candidate document id → why it was rejected."""

    @property
    def doc_ids(self) -> list[str]:
        return [s.doc_id for s in self.supporting]


class Seed(BaseModel):
    """What explore starts from."""

    doc_ids: list[str] = Field(default_factory=list)
    truth_type: str
    scope: str | None = None
    """Domain restriction, e.g. the one company an SEC explorer may see."""
    target_hops: int = Field(default=1, ge=1)


class TaskRecord(BaseModel):
    """One task in the making (see the module docstring)."""

    schema_version: int = RECORD_SCHEMA_VERSION
    id: str
    domain: str
    seed: Seed
    stages: dict[str, StageState] = Field(default_factory=lambda: {s: StageState() for s in STAGES})
    hops: list[Hop] = Field(default_factory=list)
    task: Task | None = None
    """The assembled task (SPEC §8), set by extend and completed by expand."""
    attempts: dict[str, int] = Field(default_factory=dict)
    """How many times each stage has run on this record."""

    def status(self, stage: str) -> Status:
        return self.stages[stage].status

    def mark(self, stage: str, status: Status, reason: str = "") -> None:
        self.stages[stage] = StageState(status=status, reason=reason, at=_now())

    def ready_for(self, stage: str) -> bool:
        """The previous stage passed and this one is pending or errored."""
        i = STAGES.index(stage)
        previous_ok = i == 0 or self.status(STAGES[i - 1]) == Status.PASSED
        return previous_ok and self.status(stage) in (Status.PENDING, Status.ERROR)


class RecordStore:
    """A folder of task records, one ``<id>.json`` each, plus per-stage transcripts."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.records_dir = self.root / "records"
        self.records_dir.mkdir(parents=True, exist_ok=True)

    def path(self, record_id: str) -> Path:
        if not _SAFE_ID.match(record_id):
            raise InputError(
                f"record id {record_id!r} is not a safe file name", source=str(self.root)
            )
        return self.records_dir / f"{record_id}.json"

    def add(self, record: TaskRecord) -> bool:
        """Store a new record; False (and nothing written) when the id already exists."""
        if self.path(record.id).exists():
            return False
        self.save(record)
        return True

    def save(self, record: TaskRecord) -> None:
        atomic_write_text(self.path(record.id), record.model_dump_json(indent=1))

    def load(self, record_id: str) -> TaskRecord:
        return self._read(self.path(record_id))

    def __iter__(self) -> Iterator[TaskRecord]:
        """Records in id order (temporary files of interrupted writes are skipped)."""
        for path in sorted(self.records_dir.glob("*.json")):
            yield self._read(path)

    def __len__(self) -> int:
        return sum(1 for _ in self.records_dir.glob("*.json"))

    def ready(self, stage: str) -> list[TaskRecord]:
        return [r for r in self if r.ready_for(stage)]

    def save_transcript(self, record_id: str, stage: str, messages: list[dict[str, Any]]) -> None:
        """The agent conversation of a stage, kept as teacher data next to the records."""
        path = self.root / "transcripts" / f"{record_id}.{stage}.json"
        atomic_write_text(path, json.dumps(messages, ensure_ascii=False, indent=1))

    def _read(self, path: Path) -> TaskRecord:
        try:
            return TaskRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as e:
            raise InputError(f"unreadable task record: {e}", source=str(path)) from e


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
