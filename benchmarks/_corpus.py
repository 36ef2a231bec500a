"""A large real-text corpus for benchmarks, pooled from the data samples beside the repo."""

from __future__ import annotations

from pathlib import Path

from sleuth.corpus.models import Document
from sleuth.corpus.readers import read_documents
from sleuth.tasks import read_2wiki, read_hotpotqa, read_musique

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def qa_paragraphs() -> list[Document]:
    """The distinct Wikipedia paragraphs of the three QA samples."""
    docs: dict[str, Document] = {}
    for reader, folder in (
        (read_hotpotqa, "hotpotqa_distractor_dev"),
        (read_musique, "musique_ans_dev"),
        (read_2wiki, "2wikimultihopqa_dev"),
    ):
        for d in reader(SHARED / folder)[0]:
            docs.setdefault(d.id, d)
    return list(docs.values())


def shared_documents() -> list[Document]:
    """Wikipedia paragraphs (three QA samples), Enron emails, SEC filings (Markdown)."""
    docs = {d.id: d for d in qa_paragraphs()}
    for d in read_documents(
        [SHARED / "enron_emails" / "emails.zip", SHARED / "sec_edgar_filings" / "markdown"]
    ):
        docs.setdefault(d.id, d)
    return list(docs.values())


def questions(n: int) -> list[str]:
    tasks = (
        read_hotpotqa(SHARED / "hotpotqa_distractor_dev")[1]
        + read_2wiki(SHARED / "2wikimultihopqa_dev")[1]
    )
    return [t.query for t in tasks[:n]]
