"""Per-domain explore settings: answer types, prompt guidance, seeds and extra tools.

Four domains over local corpora (SPEC §4, report §3.3):

* ``web``: encyclopedic pages; a tool lists the documents that mention a phrase (the link
  structure a bridge hop follows).
* ``sec``: filing text; the explorer sees one company only and gets tools to list its filings,
  search inside one filing and pull random chunks, because filings lack the topical links of
  the web. Answers are locations, numbers or dates.
* ``patents``: patent records; where a patent's cited references are in the corpus, the task is
  to find the prior art for an obfuscated claim.
* ``email``: messages with thread ids; tools fetch a thread, search one person's mail, sample it
  and list threads that share participants (cross-thread links).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sleuth.datagen.docs import DocStore
from sleuth.datagen.pipeline.agent import AgentTool, string_params
from sleuth.datagen.pipeline.workspace import Session
from sleuth.errors import InputError

WEB_TRUTH_TYPES = (
    "person", "location", "event", "organization", "company", "date", "film or TV show",
    "book", "song", "album", "award", "product", "historical period", "sports team",
    "building or landmark", "invention", "law",
)  # fmt: skip
SEC_TRUTH_TYPES = ("location", "number", "date")
PATENT_TRUTH_TYPES = ("patent number", "date")
EMAIL_TRUTH_TYPES = ("person", "location", "event", "organization", "date")
MAX_LISTED = 10


@dataclass(frozen=True)
class SeedPick:
    doc_ids: list[str]
    scope: str | None = None


@dataclass(frozen=True)
class Domain:
    """What makes explore different from one corpus to another."""

    name: str
    truth_types: tuple[str, ...]
    guidance: str
    """Paragraph added to the explore and extend prompts."""
    pick_seed: Callable[[DocStore, random.Random], SeedPick]
    tools: Callable[[Session], list[AgentTool]]
    """Extra tools on top of the session's base tools."""
    scope_key: str | None = None
    """Metadata field whose value restricts the explorer (the company for SEC)."""

    def scope_docs(self, docs: DocStore, scope: str | None) -> list[str] | None:
        if self.scope_key is None or scope is None:
            return None
        return sorted(d for d, m in docs.metadata.items() if str(m.get(self.scope_key)) == scope)


# --- web ---------------------------------------------------------------------------------


def _web_seed(docs: DocStore, rng: random.Random) -> SeedPick:
    titled = [d for d in docs.doc_ids if docs.title(d)] or docs.doc_ids
    return SeedPick(docs.sample(rng, 5, among=titled))


def _web_tools(session: Session) -> list[AgentTool]:
    def mentioning(phrase: str) -> str:
        needle = " ".join(phrase.split()).casefold()
        if len(needle) < 3:
            return "Error: give a phrase of at least 3 characters"
        found = [
            d
            for d in session.ws.docs.doc_ids
            if session.allowed(d) and needle in " ".join(session.ws.docs.text(d).split()).casefold()
        ]
        note = f"{len(found)} documents mention it" + (f"; first {MAX_LISTED}:" if found else ".")
        return note + "\n" + session.ws.previews(found[:MAX_LISTED])

    return [
        AgentTool(
            "documents_mentioning",
            "Documents whose text contains a phrase (e.g. another document's title): the links "
            "between pages.",
            string_params(phrase="Exact phrase, case-insensitive."),
            mentioning,
        )
    ]


# --- SEC filings -----------------------------------------------------------------------


def _sec_seed(docs: DocStore, rng: random.Random) -> SeedPick:
    companies = sorted({str(m["company"]) for m in docs.metadata.values() if m.get("company")})
    if not companies:
        raise InputError(
            "no document has a 'company' field; index filings read by sleuth.corpus.sec"
        )
    company = rng.choice(companies)
    filings = sorted(d for d, m in docs.metadata.items() if m.get("company") == company)
    return SeedPick(docs.sample(rng, 3, among=filings), scope=company)


def _sec_tools(session: Session) -> list[AgentTool]:
    docs = session.ws.docs
    visible = session.scope if session.scope is not None else docs.doc_ids

    def list_filings() -> str:
        rows = [
            f"- {d} | {docs.title(d)} | {len(session.ws.index.document_chunks(d))} chunks"
            for d in visible
        ]
        return "\n".join(rows) or "No filings."

    def search_filing(doc_id: str, query: str) -> str:
        if not session.allowed(doc_id):
            return f"Error: {doc_id!r} is not a filing of this company"
        hits = session.ws.scoped_search(query, [doc_id], exclude=session.seen)
        return session.show(session.ws.pack(hits))

    def random_chunks(doc_id: str = "") -> str:
        if doc_id and not session.allowed(doc_id):
            return f"Error: {doc_id!r} is not a filing of this company"
        pool = session.ws.chunk_ids_of([doc_id] if doc_id else visible)
        fresh = sorted(set(pool) - session.seen) or sorted(pool)
        picked = session.rng.sample(fresh, min(5, len(fresh)))
        hits = [session.ws.hit(c) for c in picked]
        return session.show(session.ws.pack(hits))

    return [
        AgentTool(
            "list_filings",
            "The filings you may see (one company's when restricted): id, title, size.",
            {"type": "object", "properties": {}, "required": []},
            list_filings,
        ),
        AgentTool(
            "search_filing",
            "Search inside one filing of this company.",
            string_params(doc_id="Filing (document) id.", query="What to look for."),
            search_filing,
        ),
        AgentTool(
            "random_chunks",
            "Five random chunks not shown before, from one filing or (doc_id empty) from any "
            "filing of this company: a way to stumble on facts search would not find.",
            {
                "type": "object",
                "properties": {"doc_id": {"type": "string", "description": "Filing id or ''."}},
                "required": [],
            },
            random_chunks,
        ),
    ]


# --- patents ---------------------------------------------------------------------------


def cited_in_corpus(docs: DocStore, doc_id: str) -> list[str]:
    """Cited patents of ``doc_id`` that are documents of this corpus."""
    cited = str(docs.meta(doc_id).get("cited_patents") or "").split()
    return [c for c in cited if c != doc_id and c in docs]


def _patent_seed(docs: DocStore, rng: random.Random) -> SeedPick:
    with_prior_art = [d for d in docs.doc_ids if cited_in_corpus(docs, d)]
    if with_prior_art:
        return SeedPick([rng.choice(sorted(with_prior_art))])
    return SeedPick(docs.sample(rng, 5))


def _patent_tools(session: Session) -> list[AgentTool]:
    docs = session.ws.docs

    def cited_references(doc_id: str) -> str:
        if doc_id not in docs:
            return f"Error: unknown document {doc_id!r}"
        cited = str(docs.meta(doc_id).get("cited_patents") or "").split()
        if not cited:
            return "This patent lists no cited patents."
        present = [c for c in cited if c in docs]
        lines = [f"{len(cited)} cited patents, {len(present)} of them in the corpus:"]
        return "\n".join(lines) + "\n" + session.ws.previews(present[:MAX_LISTED])

    def earlier_similar(doc_id: str) -> str:
        if doc_id not in docs:
            return f"Error: unknown document {doc_id!r}"
        date = str(docs.meta(doc_id).get("date") or "")
        hits = session.ws.toolbox.search_corpus(docs.text(doc_id)[:1500], exclude=session.seen)
        earlier = [
            h.doc_id for h in hits.chunks
            if h.doc_id != doc_id and str(docs.meta(h.doc_id).get("date") or "") < date
        ]  # fmt: skip
        return session.ws.previews(dict.fromkeys(earlier)) if earlier else "No earlier match."

    return [
        AgentTool(
            "cited_references",
            "The patents a patent cites (its examiner's and applicant's prior art), with those "
            "present in the corpus listed.",
            string_params(doc_id="Patent document id."),
            cited_references,
        ),
        AgentTool(
            "earlier_similar_patents",
            "Patents granted before this one whose text is closest to it: prior-art candidates.",
            string_params(doc_id="Patent document id."),
            earlier_similar,
        ),
    ]


# --- email ------------------------------------------------------------------------------


def _email_seed(docs: DocStore, rng: random.Random) -> SeedPick:
    return SeedPick(docs.sample(rng, 5))


def _participants(meta: dict[str, Any]) -> set[str]:
    people = f"{meta.get('from', '')},{meta.get('to', '')}".replace(";", ",").split(",")
    return {p.strip().casefold() for p in people if "@" in p or p.strip()} - {""}


def _email_tools(session: Session) -> list[AgentTool]:
    docs = session.ws.docs

    def thread_docs(thread_id: str) -> list[str]:
        members = [d for d, m in docs.metadata.items() if m.get("thread_id") == thread_id]
        return sorted(members, key=lambda d: (str(docs.meta(d).get("date", "")), d))

    def get_thread(thread_id: str) -> str:
        members = thread_docs(thread_id)
        if not members:
            return f"Error: unknown thread {thread_id!r}"
        session.read_docs.update(members)
        return "\n\n".join(f"# DOCUMENT ID: {d}\n{docs.text(d)}" for d in members)

    def person_docs(person: str) -> list[str]:
        key = person.strip().casefold()
        return [
            d for d, m in docs.metadata.items()
            if key and (key in " ".join(_participants(m)) or key in docs.text(d).casefold())
        ]  # fmt: skip

    def search_person(person: str, query: str) -> str:
        mine = person_docs(person)
        if not mine:
            return f"No email from, to or mentioning {person!r}."
        return session.show(session.ws.pack(session.ws.scoped_search(query, mine, session.seen)))

    def random_person_emails(person: str) -> str:
        mine = sorted(person_docs(person))
        return session.ws.previews(session.rng.sample(mine, min(5, len(mine)))) if mine else "None."

    def related_threads(thread_id: str) -> str:
        members = thread_docs(thread_id)
        people = set().union(*(_participants(docs.meta(d)) for d in members)) if members else set()
        shared: dict[str, set[str]] = {}
        for m in docs.metadata.values():
            other = m.get("thread_id")
            if other and other != thread_id:
                shared.setdefault(other, set()).update(_participants(m) & people)
        ranked = sorted((t for t in shared if shared[t]), key=lambda t: (-len(shared[t]), t))
        lines = [
            f"- {t} | {docs.meta(thread_docs(t)[0]).get('subject', '')} | shared: "
            + ", ".join(sorted(shared[t]))
            for t in ranked[:MAX_LISTED]
        ]
        return "\n".join(lines) or "No other thread shares a participant."

    return [
        AgentTool("get_thread", "Every message of a thread, oldest first.",
                  string_params(thread_id="Thread id (from a message's metadata)."), get_thread),
        AgentTool("search_person", "Search the mail sent by, sent to or mentioning one person.",
                  string_params(person="Name or address.", query="What to look for."),
                  search_person),
        AgentTool("random_person_emails", "Five random messages of one person.",
                  string_params(person="Name or address."), random_person_emails),
        AgentTool("related_threads", "Other threads that share participants with this one.",
                  string_params(thread_id="Thread id."), related_threads),
    ]  # fmt: skip


# --- registry ---------------------------------------------------------------------------

DOMAINS: dict[str, Domain] = {
    "web": Domain(
        name="web",
        truth_types=WEB_TRUTH_TYPES,
        guidance=(
            "The collection is encyclopedic pages. Start from the seed pages, follow what they "
            "mention (documents_mentioning finds pages that name something), and build the "
            "puzzle around something related to a seed page rather than the seed itself."
        ),
        pick_seed=_web_seed,
        tools=_web_tools,
    ),
    "sec": Domain(
        name="sec",
        truth_types=SEC_TRUTH_TYPES,
        guidance=(
            "The collection is SEC filings, and you may only see the filings of one company. "
            "Filings repeat boilerplate, so use random_chunks and search_filing to find concrete, "
            "company-specific facts (an office location, an amount, a date of an event). The "
            "answer must be a location, a number or a date copied exactly from a filing, needing "
            "no arithmetic. Do not hint at the company's name or its industry."
        ),
        pick_seed=_sec_seed,
        tools=_sec_tools,
        scope_key="company",
    ),
    "patents": Domain(
        name="patents",
        truth_types=PATENT_TRUTH_TYPES,
        guidance=(
            "The collection is patents. When the seed patent cites references that are in the "
            "collection (cited_references), describe one of its claims in plain, general words "
            "and make the answer the number of a cited patent that discloses the same elements, "
            "as written in that patent's text. Otherwise find an earlier patent that anticipates "
            "a later one (earlier_similar_patents). Never copy claim wording: rephrase each "
            "element with broader terms and drop names, numbers and acronyms."
        ),
        pick_seed=_patent_seed,
        tools=_patent_tools,
    ),
    "email": Domain(
        name="email",
        truth_types=EMAIL_TRUTH_TYPES,
        guidance=(
            "The collection is email. Look for links between threads (related_threads, "
            "search_person): the same person, meeting, deal or place coming up in different "
            "conversations. Never write a name in a clue, not even a first name; refer to people "
            "by role or by what they did ('the trader who asked for the revised figures')."
        ),
        pick_seed=_email_seed,
        tools=_email_tools,
    ),
}


def get_domain(name: str) -> Domain:
    """The domain called ``name``; a ``ValueError`` lists the known ones."""
    try:
        return DOMAINS[name]
    except KeyError:
        raise InputError(f"unknown domain {name!r}; choose one of {', '.join(DOMAINS)}") from None
