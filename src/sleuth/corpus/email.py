"""Email messages (RFC 822 / .eml, mbox, maildir files) as documents with thread ids.

Thread id: the first id of ``References`` (or ``In-Reply-To``), which names the thread root;
without those headers (the Enron sample has none), the subject with RE:/FW: prefixes removed.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import hashlib
import mailbox
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from sleuth.corpus.html import html_to_text
from sleuth.corpus.models import Document
from sleuth.errors import InputError

_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
_MSGID = re.compile(r"<([^<>]+)>")


def is_mbox_bytes(data: bytes) -> bool:
    """mbox files start with a ``From `` separator line; single RFC 822 messages never do."""
    return data.startswith(b"From ")


def normalized_subject(subject: str) -> str:
    return " ".join(_PREFIX.sub("", subject or "").lower().split())


def thread_id(msg: EmailMessage) -> str:
    for header in ("References", "In-Reply-To"):
        ids = _MSGID.findall(str(msg.get(header, "") or ""))
        if ids:
            return str(ids[0])
    own = _MSGID.findall(str(msg.get("Message-ID", "") or ""))
    subject = normalized_subject(str(msg.get("Subject", "") or ""))
    if subject:
        return "subject:" + hashlib.sha1(subject.encode()).hexdigest()[:16]
    return str(own[0]) if own else ""


def _body_text(msg: EmailMessage) -> str:
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content: str
    try:
        content = part.get_content()
    except (LookupError, UnicodeDecodeError, AssertionError):
        payload: Any = part.get_payload(decode=True) or b""
        content = payload.decode("latin-1")
    if part.get_content_subtype() == "html":
        content = html_to_text(content)[1]
    return content.strip()


def _message_to_document(msg: EmailMessage, source: str, fallback_id: str) -> Document:
    ids = _MSGID.findall(str(msg.get("Message-ID", "") or ""))
    doc_id = ids[0] if ids else fallback_id
    subject = str(msg.get("Subject", "") or "").strip()
    body = _body_text(msg)
    if not body and not subject:
        raise InputError("email has neither subject nor body", source=source, record=doc_id)
    header = "\n".join(
        f"{h}: {msg.get(h)}" for h in ("From", "To", "Cc", "Date", "Subject") if msg.get(h)
    )
    metadata: dict[str, Any] = {
        "subject": subject,
        "from": str(msg.get("From", "") or ""),
        "to": str(msg.get("To", "") or ""),
        "date": _sent_at(msg),
        "thread_id": thread_id(msg),
        "path": fallback_id,
        "domain": "email",
    }
    if metadata["date"] is None:  # absent or unreadable: the header stays in the text
        del metadata["date"]
    return Document(
        id=doc_id, text=f"{header}\n\n{body}".strip(), title=subject or None, metadata=metadata
    )


def _sent_at(msg: EmailMessage) -> datetime | None:
    """The Date header as an aware datetime; None when absent or unreadable (the text keeps it)."""
    raw = str(msg.get("Date", "") or "")
    try:
        sent = email.utils.parsedate_to_datetime(raw) if raw else None
    except (TypeError, ValueError, IndexError):
        return None
    return sent if sent is None or sent.tzinfo else sent.replace(tzinfo=UTC)


def parse_message(data: bytes, source: str, fallback_id: str) -> Document:
    """Parse one RFC 822 message; anything that is not an email raises InputError."""
    msg = email.message_from_bytes(data, policy=email.policy.default)
    if not msg.keys() or msg.defects and not (msg.get("From") or msg.get("Message-ID")):
        raise InputError("not an email message (no headers)", source=source)
    if not (msg.get("From") or msg.get("Message-ID") or msg.get("Subject")):
        raise InputError("not an email message (no From, Message-ID or Subject)", source=source)
    return _message_to_document(msg, source, fallback_id)


def iter_mbox_bytes(data: bytes, source: str) -> Iterator[Document]:
    """mbox needs a file for the stdlib parser; spill to a temporary file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "box.mbox"
        path.write_bytes(data)
        box = mailbox.mbox(str(path), factory=None, create=False)
        for i, raw in enumerate(box):
            msg = email.message_from_bytes(raw.as_bytes(), policy=email.policy.default)
            yield _message_to_document(
                msg, f"{source} message {i + 1}", fallback_id=f"{source}#{i + 1}"
            )
