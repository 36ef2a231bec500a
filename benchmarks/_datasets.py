"""The corpora and questions ``quality.py`` evaluates: QA samples, their pools, hand-written sets.

* ``HotpotQA`` / ``MuSiQue`` / ``2Wiki``: one staged sample's paragraphs and questions.
* ``combined``: the three samples' paragraphs in one index, each dataset's questions against it.
* ``pooled``: ``combined`` plus HippoRAG 2's whole 2Wiki retrieval corpus (6,119 passages), the
  harder distractor pool that HippoRAG 2's published Recall@5 is measured on.
* ``enron`` / ``patents``: questions written by reading the shared Enron sample (595 distinct
  messages: copies of one message in several mailboxes are kept once) and the 3,522 PatentsView
  abstracts; ``benchmarks/data/NOTICE.md`` says how. Their ``dev`` split is what they evaluate;
  ``enron-test`` / ``patents-test`` (:data:`FINAL`) are the test splits, for one look per design.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sleuth.corpus import Document
from sleuth.corpus.patents import read_patents_csv
from sleuth.corpus.readers import read_documents
from sleuth.errors import InputError
from sleuth.tasks import Task, read_benchmark
from sleuth.tasks.benchmarks import title_doc_id
from sleuth.tasks.schema import load_tasks
from sleuth.train.recipes.data import STAGED

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HERE = Path(__file__).resolve().parent
HIPPORAG_2WIKI = SHARED / "hipporag_2wiki_corpus" / "2wikimultihopqa_corpus.json"
# name -> (reader, folder, the ``Task.source`` its tasks carry): the recipe's staged samples
DATASETS: dict[str, tuple[Callable[[Any], Any], Path, str]] = {
    name: (reader, SHARED / folder, source) for name, (reader, folder, source) in STAGED.items()
}
COMBINED, POOLED = "combined", "pooled"
POOLS = (COMBINED, POOLED)  # corpora whose rows are named ``<pool>/<dataset>``
# hand-written question sets: name -> (questions file, corpus loader)
HANDWRITTEN: dict[str, tuple[Path, Callable[[], list[Document]]]] = {}
SPLIT_SEED, DEV_SHARE = 24, 0.6


@dataclass(frozen=True)
class Corpus:
    """One index's documents and the questions asked against it, keyed by dataset name."""

    name: str
    docs: list[Document]
    tasks: dict[str, list[Task]]


def load_corpus(name: str) -> Corpus:
    """A dataset's documents and questions (the dev split of a hand-written set)."""
    if name in HANDWRITTEN or name in FINAL:
        path, read_docs = HANDWRITTEN[FINAL.get(name, name)]
        split = "test" if name in FINAL else "dev"
        return Corpus(name, read_docs(), {name: split_questions(path, split)})
    if name in POOLS:
        docs, tasks = read_benchmark([folder for _, folder, _ in DATASETS.values()])
        if name == POOLED:
            docs = pool_passages(docs, read_passages(HIPPORAG_2WIKI))
        by_source = {source: ds for ds, (_, _, source) in DATASETS.items()}
        grouped = {ds: [t for t in tasks if by_source.get(t.source) == ds] for ds in DATASETS}
        return Corpus(name, docs, grouped)
    reader, folder, _ = DATASETS[name]
    docs, tasks = reader(folder)
    return Corpus(name, docs, {name: tasks})


# ---- HippoRAG 2's 2Wiki passages ----------------------------------------------------------


def read_passages(path: Path) -> list[tuple[str, str]]:
    """``[{"title", "text"}, ...]`` as (title, text) pairs.

    Raises:
        InputError: the file is unreadable or not a list of titled passages.
    """
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
        pairs = [(str(p["title"]).strip(), str(p["text"]).strip()) for p in items]
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise InputError(f"cannot read passages ({e})", source=str(path)) from e
    return [(title, text) for title, text in pairs if title and text]


def _key(text: str) -> str:
    return re.sub(r"\W+", "", text.casefold())


def pool_passages(docs: Sequence[Document], passages: Iterable[tuple[str, str]]) -> list[Document]:
    """``docs`` plus one document per new title, ids as the QA readers make them.

    A passage whose title is already a document adds its text there unless that text is already
    in it (so gold documents keep their ids and lose nothing); a new title whose slug is taken by
    another title gets the slug plus a short hash of the title, as the readers do.
    """
    by_title = {d.title: d for d in docs}
    taken = {d.id for d in docs}
    extra: dict[str, list[str]] = {}
    for title, text in passages:
        if title in by_title and title not in extra:
            old = by_title[title]
            if _key(text) not in _key(old.text):
                by_title[title] = old.model_copy(update={"text": f"{old.text}\n\n{text}"})
            continue
        texts = extra.setdefault(title, [])
        if _key(text) not in {_key(t) for t in texts}:
            texts.append(text)
    pooled = [by_title.get(d.title, d) if d.title else d for d in docs]
    for title, texts in extra.items():
        doc_id = title_doc_id(title)
        if doc_id in taken:
            doc_id = f"{doc_id}-{hashlib.sha1(title.encode()).hexdigest()[:8]}"
        taken.add(doc_id)
        meta = {"source": "hipporag-2wiki", "domain": "wiki"}
        pooled.append(Document(id=doc_id, title=title, text="\n\n".join(texts), metadata=meta))
    return pooled


# ---- hand-written sets --------------------------------------------------------------------


def enron_documents() -> list[Document]:
    """The shared Enron sample as sleuth's reader names it, one document per distinct text.

    The sample holds one message several times (sender's and recipients' mailboxes, each with
    its own Message-ID); the first copy in reading order is kept, the way an index user would
    want one hit per message.
    """
    seen: set[str] = set()
    kept = []
    for doc in read_documents([SHARED / "enron_emails" / "emails.zip"]):
        if doc.text not in seen:
            seen.add(doc.text)
            kept.append(doc)
    return kept


def patent_documents() -> list[Document]:
    """The 3,522 PatentsView abstracts (ids ``US<number>``)."""
    return list(read_patents_csv(SHARED / "uspto_patents" / "neural_network_patent_query.csv"))


HANDWRITTEN["enron"] = (HERE / "data" / "enron_questions.jsonl", enron_documents)
HANDWRITTEN["patents"] = (HERE / "data" / "patent_questions.jsonl", patent_documents)
HANDWRITTEN["enron-2hop"] = (HERE / "data" / "enron_questions_2hop.jsonl", enron_documents)
FINAL = {"enron-test": "enron", "patents-test": "patents", "enron-2hop-test": "enron-2hop"}
"""The test splits, named apart so that no default list of rows includes them."""


def seeded_split(ids: Sequence[str]) -> dict[str, str]:
    """``dev`` for a fixed seeded 60% of the ids (by sorted id, so order of writing is moot)."""
    order = sorted(ids)
    random.Random(SPLIT_SEED).shuffle(order)
    dev = set(order[: round(DEV_SHARE * len(order))])
    return {i: "dev" if i in dev else "test" for i in ids}


def split_questions(path: Path, split: str = "dev") -> list[Task]:
    """One split of a hand-written question file: ``dev`` for development, ``test`` only
    through the :data:`FINAL` names, for one look per design."""
    return [t for t in load_tasks(path) if getattr(t, "split", None) == split]
