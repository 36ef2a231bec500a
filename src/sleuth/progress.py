"""The progress bar the command line and the demo draw on their console, and its stand-in when
no terminal watches (a log file, CI): one line every few seconds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

Update = Callable[[int, int], None]  # (done, total)


def progress_bar(console: Console) -> Progress:
    """A bar with a description, done/total and elapsed time; it stays on screen when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


class _RateColumn(TextColumn):
    def __init__(self, unit: str):
        super().__init__("")
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f} {self.unit}/s" if speed else f"- {self.unit}/s")


class ProgressLog:
    """Progress as plain lines, at most one per ``every`` seconds plus the last one. The rate
    counts only this run's work (the first update's ``done`` is work resumed, not done now)."""

    def __init__(
        self,
        console: Console,
        description: str,
        unit: str,
        every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console, self.description, self.unit = console, description, unit
        self.every, self.clock = every, clock
        self.start: tuple[float, int] | None = None
        self.last_line = float("-inf")
        self.state = (0, 0)

    def update(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
        self.state = (done, total)
        if now - self.last_line >= self.every:
            self.emit(now)

    def emit(self, now: float) -> None:
        self.last_line = now
        done, total = self.state
        t0, done0 = self.start or (now, done)
        rate = (done - done0) / (now - t0) if now > t0 else 0.0
        share = f" ({100 * done / total:.0f}%)" if total else ""
        eta = _duration((total - done) / rate) if rate > 0 and total else "?"
        self.console.print(
            f"{self.description}: {done:,}/{total:,}{share}, {rate:.1f} {self.unit}/s, ETA {eta}",
            markup=False,
            highlight=False,
        )

    def close(self) -> None:
        if self.start is not None and self.last_line != self.clock():
            self.emit(self.clock())


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


@contextmanager
def rate_progress(
    console: Console, description: str, unit: str, every: float = 10.0
) -> Iterator[Update]:
    """``update(done, total)``: a bar with units/s and an ETA on a terminal, otherwise a
    :class:`ProgressLog` line every ``every`` seconds."""
    if not console.is_terminal:
        log = ProgressLog(console, description, unit, every)
        try:
            yield log.update
        finally:
            log.close()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(
        *columns,
        _RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(description, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
