"""The task record (SPEC §8) shared by the readers, the task pipeline, eval and reward.

Tasks live in JSONL, one object per line. Unknown fields are kept, so a generator can attach
its own provenance (``generator``, ``clues``, ``gold_quotes``...) without a schema change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sleuth.errors import InputError, describe_validation_error
from sleuth.io import JsonLineError, atomic_write_text, json_lines

TASK_SCHEMA_VERSION = 1


class Task(BaseModel):
    """One search task: a query, its answer and the documents (or facts) that support it."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = TASK_SCHEMA_VERSION
    id: str = Field(min_length=1)
    query: str = Field(min_length=1)
    answer: str
    answer_aliases: list[str] = Field(default_factory=list)
    gold_doc_ids: list[str] = Field(default_factory=list)
    # Each group lists chunk ids that state the same fact; finding any one finds the fact.
    gold_chunk_groups: list[list[str]] = Field(default_factory=list)
    distractor_doc_ids: list[str] = Field(default_factory=list)
    domain: str = "unknown"
    hops: int = Field(default=1, ge=1)
    source: str = "unknown"

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        # A newer file may mean fields this version would silently misread.
        if v > TASK_SCHEMA_VERSION:
            raise ValueError(f"schema_version {v} is newer than supported {TASK_SCHEMA_VERSION}")
        return v

    @field_validator("gold_chunk_groups")
    @classmethod
    def _no_empty_group(cls, v: list[list[str]]) -> list[list[str]]:
        # An empty group is a fact nothing can find: it would cap fact recall below 1.
        if any(not group for group in v):
            raise ValueError("gold_chunk_groups must not contain an empty group")
        return v


def load_tasks(path: str | Path) -> list[Task]:
    """Read a task JSONL file; any bad line or repeated id is an ``InputError`` naming the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read task file ({e})", source=str(path)) from e
    tasks: list[Task] = []
    seen: set[str] = set()
    for lineno, value in _lines(text, path):
        task = _parse_task(value, path, lineno)
        if task.id in seen:
            raise InputError(f"line {lineno}: duplicate task id {task.id!r}", source=str(path))
        seen.add(task.id)
        tasks.append(task)
    return tasks


def _lines(text: str, path: Path) -> Iterator[tuple[int, Any]]:
    try:
        yield from json_lines(text)
    except JsonLineError as e:
        raise InputError(f"line {e.lineno}: invalid JSON ({e.msg})", source=str(path)) from e


def _parse_task(value: Any, path: Path, lineno: int) -> Task:
    try:
        return Task.model_validate(value)
    except ValidationError as e:
        reason = describe_validation_error(e)
        raise InputError(f"line {lineno}: invalid task ({reason})", source=str(path)) from e


def save_tasks(path: str | Path, tasks: Iterable[Task]) -> None:
    """Write tasks as JSONL in one atomic replace, so a crash never leaves half a task file."""
    atomic_write_text(path, "".join(t.model_dump_json() + "\n" for t in tasks))
