"""Untrusted input stays bounded: zip limits, symbolic links, linear chunking, stray files."""

from __future__ import annotations

import base64
import json
import random
import re
import zipfile
from email.message import EmailMessage

import pytest

from sleuth.corpus.chunking import chunk_document
from sleuth.corpus.files import ArchiveLimits, ReadOptions
from sleuth.corpus.models import Document
from sleuth.corpus.readers import read_documents
from sleuth.errors import InputError
from sleuth.tokens import default_counter
from tests.test_cli import sleuth


def _email(mid: str, body: str) -> bytes:
    m = EmailMessage()
    m["From"], m["Subject"], m["Message-ID"] = "a@x.org", "Hello", f"<{mid}>"
    m.set_content(body)
    return bytes(m)


def _zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


# -- archives ----------------------------------------------------------------------------
def test_default_limits_refuse_a_huge_member_before_reading_it(tmp_path):
    """65 MiB of mail body zips to ~65 KiB; it is refused from the header, not inflated."""
    z = _zip(tmp_path / "bomb.zip", {"big.eml": _email("b@x", "x" * (65 << 20))})
    assert z.stat().st_size < 1 << 20
    with pytest.raises(InputError) as e:
        read_documents([z])
    assert re.search(r"big.eml is 6\d\.\d MiB uncompressed, over the 64.0 MiB limit", str(e.value))
    assert "--archive-limits entry=SIZE" in str(e.value)


@pytest.mark.parametrize(
    ("members", "spec", "message"),
    [
        ({"a.txt": b"a" * (2 << 20)}, "", "expands"),  # ratio ~1000:1 > 100:1
        ({f"{i}.txt": b"text" for i in range(4)}, "entries=3", "4 files, over the limit of 3"),
        (
            {"a.txt": random.Random(0).randbytes(600 << 10).hex().encode()[: 600 << 10]}
            | {"b.txt": random.Random(1).randbytes(600 << 10).hex().encode()[: 600 << 10]},
            "total=1MiB",
            "1.2 MiB uncompressed in all, over the 1.0 MiB limit",
        ),
    ],
)
def test_each_archive_limit_has_a_clear_error_and_can_be_raised(tmp_path, members, spec, message):
    z = _zip(tmp_path / "x.zip", members)
    with pytest.raises(InputError, match=message):
        read_documents([z], options=ReadOptions(archive=ArchiveLimits.parse(spec)))
    raised = ArchiveLimits.parse("entry=1GiB,total=1GiB,ratio=100000,entries=100")
    docs = read_documents([z], options=ReadOptions(archive=raised))
    assert sorted(d.id for d in docs) == sorted(members)


def test_archive_limits_spec_is_validated():
    assert ArchiveLimits.parse("entry=2.5KiB, ratio=7") == ArchiveLimits(entry=2560, ratio=7.0)
    for bad in ("entry", "size=1", "entry=lots", "total=-1"):
        with pytest.raises(InputError, match="bad --archive-limits item"):
            ArchiveLimits.parse(bad)


def test_cli_flag_raises_limits_and_a_refusal_writes_nothing(tmp_path):
    z = _zip(tmp_path / "two.zip", {"a.txt": b"alpha text", "b.txt": b"beta text"})
    index = tmp_path / "ix"
    refused = sleuth("ingest", str(z), "--index", str(index), "--archive-limits", "entries=1")
    assert refused.returncode == 2 and not index.exists()
    assert "2 files, over the limit of 1" in refused.stderr
    assert "--archive-limits entries=N" in refused.stderr
    ok = sleuth(
        "ingest",
        str(z),
        "--index",
        str(index),
        "--embedder",
        "hash",
        "--archive-limits",
        "entries=2",
    )
    assert ok.returncode == 0, ok.stderr


# -- folders -----------------------------------------------------------------------------
def test_folder_walk_stays_inside_unless_asked(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("system secret")
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "leak.txt").symlink_to(outside / "secret.txt")
    (root / "alias.txt").symlink_to(root / "a.txt")  # stays inside: read
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)

    options = ReadOptions()
    assert sorted(d.id for d in read_documents([root], options=options)) == ["a.txt", "alias.txt"]
    assert any("leak.txt: links outside the folder" in s for s in options.skipped)
    assert any("linked: linked folder" in s for s in options.skipped)

    followed = read_documents([root], options=ReadOptions(follow_links=True))
    assert sorted(d.id for d in followed) == ["a.txt", "alias.txt", "leak.txt", "linked/secret.txt"]


def test_stray_files_in_a_mail_folder_are_skipped_and_reported(tmp_path):
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "1.").write_bytes(_email("m1@x", "Gas price"))
    (tmp_path / "LICENSE").write_text("Permission is hereby granted, free of charge")
    (tmp_path / "scan.pdf").write_bytes(b"%PDF-1.4")
    options = ReadOptions()
    assert [d.id for d in read_documents([tmp_path], options=options)] == ["m1@x"]
    assert sorted(s.split(": ")[0].rsplit("/", 1)[-1] for s in options.skipped) == [
        "LICENSE",
        "scan.pdf",
    ]
    with pytest.raises(InputError, match="not an email"):  # named on its own, it is an error
        read_documents([tmp_path / "LICENSE"])


def test_cli_prints_what_it_skipped(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("alpha text")
    (tmp_path / "docs" / "NOTES").write_text("not mail")
    proc = sleuth(
        "ingest", str(tmp_path / "docs"), "--index", str(tmp_path / "ix"), "--embedder", "hash"
    )
    assert proc.returncode == 0, proc.stderr
    assert "skipped " in proc.stderr and "NOTES" in proc.stderr


def test_cli_skip_unreadable(tmp_path):
    """Without the flag an unreadable file stops the ingest before any write; with it the
    file is listed and the rest is indexed; a file in an older encoding is read and named."""
    docs, ix = tmp_path / "docs", tmp_path / "ix"
    docs.mkdir()
    (docs / "a.txt").write_text("alpha text")
    (docs / "old.txt").write_bytes("caf\xe9 cr\xe8me".encode("cp1252"))
    (docs / "noise.txt").write_bytes(bytes(range(256)) * 4)
    args = ("ingest", str(docs), "--index", str(ix), "--embedder", "hash")
    proc = sleuth(*args)
    assert (
        proc.returncode == 2 and "noise.txt" in proc.stderr and "--skip-unreadable" in proc.stderr
    )
    assert not ix.exists()
    proc = sleuth(*args, "--skip-unreadable", "--json")
    assert proc.returncode == 0, proc.stderr
    assert f"skipped {docs / 'noise.txt'}" in " ".join(proc.stderr.split())
    assert f"{docs / 'old.txt'} (cp1252)" in " ".join(proc.stderr.split())
    assert json.loads(proc.stdout)["index_documents"] == 2


# -- chunking ----------------------------------------------------------------------------
class CountingCounter:
    """The real o200k counter, recording how many characters it was asked to count."""

    def __init__(self) -> None:
        self.inner, self.chars = default_counter(), 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)


def _unbroken(kind: str, n: int) -> str:
    rng = random.Random(n)
    if kind == "base64":
        return base64.b64encode(rng.randbytes(n * 3 // 4)).decode()[:n]
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(n))


@pytest.mark.parametrize("kind", ["base64", "cjk"])
def test_chunking_text_without_breaks_is_linear(kind):
    """Work per character stays flat as the text grows (it grew with the length before)."""
    per_char = []
    for n in (30_000, 120_000):
        text, counter = _unbroken(kind, n), CountingCounter()
        chunks = chunk_document(Document(id="d", text=text), counter=counter)
        assert "".join(c.text for c in chunks) == text  # no overlap possible without breaks
        assert all(c.tokens <= 512 for c in chunks)
        assert min(c.tokens for c in chunks[:-1]) > 400  # pieces are not needlessly small
        per_char.append(counter.chars / n)
    assert max(per_char) < 12 and per_char[1] < per_char[0] * 1.3


def test_cjk_sentences_are_chunk_boundaries():
    text = "".join(f"这是第{i}句话，讲述一个很长的故事。" for i in range(400))
    chunks = chunk_document(Document(id="zh", text=text), max_tokens=64, overlap_tokens=0)
    assert len(chunks) > 10
    assert all(c.text.endswith("。") for c in chunks)
