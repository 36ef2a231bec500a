"""One ``sleuth`` command in a fresh process, timed: what a user pays, start-up included."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def run_sleuth(args: list[str], log: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (MB) of ``python -m sleuth.cli ARGS``, its output in ``log``;
    a failure stops the benchmark with the output's tail."""
    with log.open("w+") as out:
        t0 = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "sleuth.cli", *args], stdout=out, stderr=out
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status):
            out.seek(0)
            raise SystemExit(f"sleuth {' '.join(args)} failed:\n{out.read()[-2000:]}")
    return seconds, usage.ru_maxrss // 1024
