"""Atomic writes stay whole when several threads of one process write the same path at once
(the tokenizer cache is filled this way by concurrent evaluations); what sleuth reads back from
disk fails as one error naming the file and line."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sleuth.datagen.pipeline.llm import Ledger, ResponseCache
from sleuth.errors import InputError
from sleuth.io import atomic_write_bytes, atomic_write_text, read_jsonl


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


# -- files sleuth reads back are one InputError naming the file (and line) ----------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read: No such file"),
        (bytes(range(256)), "not UTF-8 text (byte 128)"),
        (b'{"a": 1}\n{not json\n{"b": 2}\n', "line 2 is not JSON"),
        (b'{"a": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
    ],
)
def test_read_jsonl_names_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "r.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match=re.escape(message)) as e:
        list(read_jsonl(path, fix="do this"))
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)
    assert str(e.value).endswith("do this") == (content is not None)


def test_read_jsonl_still_skips_a_torn_last_line(tmp_path):
    (tmp_path / "r.jsonl").write_text('{"a": 1}\n{"b": ')
    assert list(read_jsonl(tmp_path / "r.jsonl")) == [{"a": 1}]


def test_a_corrupt_cache_entry_or_ledger_says_which_file_and_what_to_do(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    cache.path("ab12").parent.mkdir(parents=True)
    cache.path("ab12").write_text("{torn")
    with pytest.raises(InputError, match="delete it to ask the model again"):
        cache.get("ab12")
    (tmp_path / "ledger.json").write_text('{"stages": 3}')
    with pytest.raises(InputError, match="not a usage ledger"):
        Ledger(tmp_path / "ledger.json")
