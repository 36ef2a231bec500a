"""Atomic writes stay whole when several threads of one process write the same path at once
(the tokenizer cache is filled this way by concurrent evaluations)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from sleuth.io import atomic_write_bytes, atomic_write_text


def test_concurrent_writers_of_one_path_leave_one_whole_payload(tmp_path):
    path = tmp_path / "cache" / "file.bin"
    payloads = [bytes([i]) * 300_000 for i in range(8)]
    start = threading.Barrier(len(payloads))  # reusable: one release per round

    def write(data: bytes) -> None:
        start.wait()
        atomic_write_bytes(path, data)

    for _ in range(5):
        with ThreadPoolExecutor(len(payloads)) as pool:
            list(pool.map(write, payloads))  # re-raises a writer's error
        assert path.read_bytes() in payloads
        assert sorted(p.name for p in path.parent.iterdir()) == ["file.bin"]  # no temp file left


def test_text_is_written_as_utf8_with_lone_surrogates_replaced(tmp_path):
    path = tmp_path / "a.txt"
    atomic_write_text(path, "é\ud800")
    assert path.read_bytes() == "é\ufffd".encode()
