"""Hand freed heap memory back to the operating system.

A long CPU run frees large buffers from many threads: the rollout engine is rebuilt after every
optimiser step and the trainer's activations are freed after every update. glibc keeps such
memory in its per-thread arenas, so the process only grows (measured: six CTranslate2 syncs of
SmolLM2-135M took RSS from 1.0 to 2.7 GB; with a trim after each, to 1.4 GB).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def trim_heap() -> bool:
    """Return the free pages of every glibc arena to the OS (``malloc_trim(0)``).

    Returns False where there is no glibc (macOS, musl): nothing to do there.
    """
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
