"""trim_heap hands the free pages in the middle of glibc's heap back to the OS."""

from __future__ import annotations

import ctypes
import os
import sys

import pytest

from sleuth.memory import _libc, trim_heap

BLOCK = 64 * 1024  # under glibc's mmap threshold: served from the heap, not mapped alone
BLOCKS = 1600  # 100 MB


def _rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or _libc() is None, reason="needs Linux glibc"
)
def test_trim_returns_the_holes_left_by_freed_blocks() -> None:
    libc = _libc()
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    for b in blocks:
        ctypes.memset(b, 1, BLOCK)  # touch every page, so it counts in RSS
    for b in blocks[::2]:  # free every other block: holes the heap top cannot shrink away
        libc.free(b)
    before = _rss_bytes()
    assert trim_heap() is True
    after = _rss_bytes()
    for b in blocks[1::2]:
        libc.free(b)
    # half of the 100 MB was freed; the trim gives most of it back
    assert before - after > 0.6 * BLOCK * BLOCKS / 2
