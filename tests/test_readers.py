"""Document readers: formats, and one clear error for each kind of bad input."""

from __future__ import annotations

import mailbox
import zipfile
from email.message import EmailMessage

import pytest

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


def test_bad_encoding_is_reported(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(InputError, match="not valid UTF-8"):
        read_documents([p])


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
