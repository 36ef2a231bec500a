"""Document readers: formats, and one clear error for each kind of bad input."""

from __future__ import annotations

import mailbox
import tempfile
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleuth.corpus.files import ReadOptions
from sleuth.corpus.readers import read_documents, read_path
from sleuth.errors import InputError
from tests.conftest import SHARED_DATA


def _jsonl(tmp_path, lines: list[str], name="docs.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_jsonl_fields(tmp_path):
    p = _jsonl(
        tmp_path,
        [
            '{"id": "a", "text": "alpha", "title": "A", "metadata": {"k": 1}}',
            '{"id": 7, "text": "seven"}',
        ],
    )
    docs = read_documents([p])
    assert [(d.id, d.text, d.title) for d in docs] == [("a", "alpha", "A"), ("7", "seven", None)]
    assert docs[0].metadata == {"k": 1}


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"id": "a", "text": "x"}', '{"text": "y"}'], "line 2: missing 'id'"),
        (['{"id": "a", "text": "x"}', "{not json"], "line 2: invalid JSON"),
        (['{"id": "a", "text": "   "}'], "empty text"),
        (['{"id": "a", "text": "x"}', '{"id": "a", "text": "y"}'], "duplicate document id"),
        (['{"id": "a"}'], "missing or non-string 'text'"),
    ],
)
def test_jsonl_errors_name_file_and_record(tmp_path, lines, expected):
    p = _jsonl(tmp_path, lines)
    with pytest.raises(InputError) as e:
        read_documents([p])
    assert str(p) in str(e.value) and expected in str(e.value)
    assert "\n" not in str(e.value)


def test_text_in_older_encodings_is_read_and_noted(tmp_path):
    """Text and HTML that are not UTF-8: windows-1252, UTF-16 with its mark, a page's declared
    charset; each read exactly and listed in ``options.recoded``."""
    (tmp_path / "latin.txt").write_bytes(
        "Caf\xe9 na\xefve \u2014 \u201cquoted\u201d".encode("cp1252")
    )
    (tmp_path / "wide.txt").write_bytes("A note about pears.".encode("utf-16"))
    page = '<html><head><meta charset="koi8-r"><title>Тест</title></head><body>Привет мир</body>'
    (tmp_path / "ru.html").write_bytes(page.encode("koi8-r"))
    (tmp_path / "plain.txt").write_text("plain UTF-8", encoding="utf-8")
    options = ReadOptions()
    docs = {d.id: d for d in read_documents([tmp_path], options=options)}
    assert docs["latin.txt"].text == "Caf\xe9 na\xefve \u2014 \u201cquoted\u201d"
    assert docs["wide.txt"].text == "A note about pears."
    assert (docs["ru.html"].title, docs["ru.html"].text) == ("Тест", "Привет мир")
    assert sorted(options.recoded) == sorted(
        f"{tmp_path / name} ({enc})"
        for name, enc in [("latin.txt", "cp1252"), ("wide.txt", "utf-16"), ("ru.html", "koi8-r")]
    )


@given(st.text(st.sampled_from("abc XYZ.,\n\xe9\xe8\xfc\xdf\u20ac\u2019\u201c\xa0"), min_size=1))
def test_windows_1252_text_reads_back_exactly(text):
    data = text.encode("cp1252")
    try:
        data.decode("utf-8")
        return  # also valid UTF-8 (all ASCII, or a chance pair): read as that, by design
    except UnicodeDecodeError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.txt"
        path.write_bytes(data)
        if not text.strip():
            return
        assert read_documents([path])[0].text == text


def test_binary_and_jsonl_stay_errors(tmp_path):
    binary = tmp_path / "noise.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InputError, match="not valid UTF-8.*nor text in another encoding"):
        read_documents([binary])
    records = tmp_path / "r.jsonl"  # JSON is UTF-8 by definition: no guessing there
    records.write_bytes('{"id": "a", "text": "caf\xe9"}\n'.encode("cp1252"))
    with pytest.raises(InputError, match="not valid UTF-8"):
        read_documents([records])


def test_skip_unreadable_leaves_out_only_the_files_that_fail(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("a readable note")
    (folder / "noise.txt").write_bytes(bytes(range(256)) * 4)
    (folder / "torn.jsonl").write_text('{"id": "j1", "text": "fine"}\n{oops\n')
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not a zip")
    with zipfile.ZipFile(folder / "mixed.zip", "w") as z:
        z.writestr("inner/ok.md", "a readable member")
        z.writestr("inner/bad.md", bytes(range(256)) * 4)
    with pytest.raises(InputError, match="broken.zip.*--skip-unreadable") as e:
        read_documents([folder])
    assert str(e.value).count("--skip-unreadable") == 1
    options = ReadOptions(skip_unreadable=True)
    docs = read_documents([folder], options=options)
    assert sorted(d.id for d in docs) == ["good.txt", "inner/ok.md"]
    skipped = sorted(line.split(":")[0].split(", ")[0] for line in options.skipped)
    assert skipped == sorted(
        [str(folder / n) for n in ("broken.zip", "mixed.zip", "noise.txt", "torn.jsonl")]
    )
    assert any("inner/bad.md" in line for line in options.skipped)
    with pytest.raises(InputError, match="noise.txt"):  # a file named alone is never skipped
        read_documents([folder / "noise.txt"], options=ReadOptions(skip_unreadable=True))


def test_folder_of_text_markdown_html(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("plain text")
    (tmp_path / "sub" / "b.md").write_text("# Title\nmarkdown body")
    (tmp_path / "c.html").write_text(
        "<html><head><title>Page</title><style>x{}</style></head><body><p>Hello</p><script>bad()</script>"
        "<p>world &amp; more</p></body></html>"
    )
    docs = {d.id: d for d in read_documents([tmp_path])}
    assert set(docs) == {"a.txt", "sub/b.md", "c.html"}
    assert docs["c.html"].title == "Page"
    assert docs["c.html"].text == "Hello\n\nworld & more"
    assert "bad()" not in docs["c.html"].text


def _message(mid: str, subject: str, body: str, refs: str | None = None) -> EmailMessage:
    m = EmailMessage()
    m["From"], m["To"], m["Subject"], m["Message-ID"] = "a@x.org", "b@x.org", subject, f"<{mid}>"
    if refs:
        m["References"] = f"<{refs}>"
    m.set_content(body)
    return m


def test_eml_mbox_and_threads(tmp_path):
    (tmp_path / "one.eml").write_bytes(bytes(_message("m1@x", "Budget", "First message.")))
    box = mailbox.mbox(str(tmp_path / "box.mbox"))
    box.add(_message("m2@x", "Re: Budget", "A reply.", refs="m1@x"))
    box.add(_message("m3@x", "Other", "Unrelated."))
    box.flush()
    docs = {d.id: d for d in read_documents([tmp_path])}
    assert set(docs) == {"m1@x", "m2@x", "m3@x"}
    assert docs["m2@x"].metadata["thread_id"] == "m1@x"
    assert "A reply." in docs["m2@x"].text and docs["m2@x"].metadata["subject"] == "Re: Budget"


def test_maildir_inside_zip(tmp_path):
    z = tmp_path / "mail.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("smith-j/inbox/1.", bytes(_message("z1@x", "Gas deal", "Price is 3.5")))
        zf.writestr("smith-j/inbox/2.", bytes(_message("z2@x", "RE: Gas deal", "Agreed")))
        zf.writestr("notes/readme.txt", "a text file in the zip")
    docs = {d.id: d for d in read_path(z)}
    assert set(docs) == {"z1@x", "z2@x", "notes/readme.txt"}
    # no References header: the thread is the subject without RE:
    assert docs["z1@x"].metadata["thread_id"] == docs["z2@x"].metadata["thread_id"]


def test_corrupt_zip_is_an_input_error(tmp_path):
    z = tmp_path / "broken.zip"
    z.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(InputError, match="broken.zip"):
        read_documents([z])


def test_missing_path(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_documents([tmp_path / "nope.jsonl"])


@pytest.mark.skipif(not (SHARED_DATA / "enron_emails").exists(), reason="shared data not present")
def test_real_enron_maildir_zip():
    docs = read_documents([SHARED_DATA / "enron_emails" / "emails.zip"])
    assert len(docs) == 993
    assert all(d.metadata["thread_id"] for d in docs)
    threads = {d.metadata["thread_id"] for d in docs}
    assert len(threads) < len(docs)  # replies share threads
