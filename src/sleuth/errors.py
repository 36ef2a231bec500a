"""Error types shared across sleuth.

Each subclasses the stdlib error it stands in for, so callers that only know
``ValueError`` or ``RuntimeError`` still catch them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class SleuthError(Exception):
    """Base class for every error sleuth raises on purpose."""


class InputError(SleuthError, ValueError):
    """Bad user input (a file, a record, an argument). The CLI prints it on one line and exits 2."""

    def __init__(self, message: str, *, source: str | None = None, record: str | None = None):
        self.source = source
        self.record = record
        where = ", ".join(p for p in (source, f"record {record}" if record else None) if p)
        super().__init__(f"{where}: {message}" if where else message)


class ConfigError(InputError):
    """A setting out of range or inconsistent with another: every config validation raises it.
    A kind of bad user input (the CLI prints it on one line and exits 2)."""


class IndexIncompleteError(SleuthError, RuntimeError):
    """An index whose last ingest did not finish; re-running the same ingest resumes it."""


class ToolError(SleuthError, RuntimeError):
    """A tool call the policy made that cannot be served (bad regex, unknown document, ...)."""


class RunFailedError(SleuthError, RuntimeError):
    """A run ended on its policy's failure (an endpoint that never answered), or every query of
    an eval did: the command failed, though its trajectories were written."""


class BusyError(SleuthError, RuntimeError):
    """Another sleuth process holds the lock of a folder it is writing (an index, an eval run)."""


def describe_validation_error(err: ValidationError) -> str:
    """One line naming the failing fields of a pydantic error, for an ``InputError`` message."""
    parts = [f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in err.errors()[:3]]
    return "; ".join(parts).replace("\n", " ")
