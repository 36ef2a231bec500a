"""The offline generator on corpora without Wikipedia-style titles: short templated records and
e-mails. Every task must be verified (its answer in its gold document, its clue a quote of it with
the answer masked) and unambiguous (no other place in the corpus fits the clue with another value).
"""

from __future__ import annotations

import random
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sleuth.corpus.email import parse_message
from sleuth.corpus.models import Document
from sleuth.datagen import generate_offline
from sleuth.datagen.evidence import answer_in_text
from sleuth.datagen.offline.config import OfflineConfig
from sleuth.datagen.offline.facts import answer_spans
from sleuth.datagen.quotes import normalize


def words(text: str) -> list[str]:
    return text.split()


FIRST = words("Maria Ana Liam Noah Olivia Elena Tomas Yusuf Priya Kenji Sofia Diego")
LAST = words("Lopez Chen Okafor Novak Silva Haddad Kowalski Tanaka Moreau Fischer Rossi Nguyen")
CITIES = words("Boston Denver Austin Seattle Portland Omaha Tucson Raleigh Dayton Fresno")
ORGS = ["Acme Corp", "Borealis Labs", "Cobalt Systems", "Dunmore Foods", "Everline Bank"]
PATTERNS = [
    "{name} works at {org} in {city}.",
    "{name} manages project P-{n} for {org}.",
    "{name} moved to {city} to join {org}.",
]


def templated(count: int, seed: int, titled: bool = False) -> list[Document]:
    """``count`` one-sentence records filled from small vocabularies: every word recurs."""
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        values = {
            "name": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "org": rng.choice(ORGS),
            "city": rng.choice(CITIES),
            "n": 100 + i,
        }
        text = rng.choice(PATTERNS).format(**values)
        docs.append(Document(id=f"rec{i}", text=text, title=f"Record {i}" if titled else None))
    return docs


def clue_places(clue: str, text: str) -> int:
    """How often the clue's fixed words occur in ``text``, in order, with anything for ``[X]``
    (an ``[X]`` at either end leaves those words open on that side)."""
    pieces = normalize(clue.replace("[X]", "qzxq")).split("qzxq")
    fixed = [re.escape(p) for p in pieces if p.strip()]
    return len(re.findall(".{1,60}?".join(fixed), normalize(text)))


def assert_verified_and_unique(tasks: list, docs: list[Document]) -> None:
    texts = {d.id: d.text for d in docs}
    for task in tasks:
        extra = task.model_extra
        assert extra["template"] in {"fact", "relay", "single", "bridge", "comparison"}
        if extra["template"] == "relay":
            assert_relay(task, texts)
            continue
        if extra["template"] != "fact":
            continue
        (gold,) = task.gold_doc_ids
        (clue,) = extra["clues"]
        assert answer_in_text(task.answer, task.answer_aliases, texts[gold])
        assert not answer_in_text(task.answer, task.answer_aliases, task.query)
        restored = clue.replace("[X]", task.answer)
        assert normalize(restored) in normalize(texts[gold])
        here = normalize(texts[gold]).count(normalize(restored))
        for doc_id, text in texts.items():  # every place the clue fits is the answer's
            assert clue_places(clue, text) == (here if doc_id == gold else 0), (task.id, doc_id)
        for doc_id in task.distractor_doc_ids:
            assert doc_id != gold
            assert not answer_in_text(task.answer, task.answer_aliases, texts[doc_id])


def assert_fits_only(clue: str, gold: str, texts: dict[str, str]) -> None:
    """``clue`` (its ``[X]`` open) fits ``gold`` where its filled sentence is, and nowhere else."""
    for doc_id, text in texts.items():
        assert clue_places(clue, text) == (clue_places(clue, texts[gold]) if doc_id == gold else 0)
    assert clue_places(clue, texts[gold]) >= 1


def assert_relay(task, texts: dict[str, str]) -> None:
    """Two hops through a value only the two gold documents name: A's clue singles the value
    out, B's clue with the value filled in singles the answer out; the answer is in B only."""
    first, second = task.gold_doc_ids
    clue_a, clue_b = task.model_extra["clues"]
    quote_a = task.model_extra["gold_quotes"][first][0]
    pieces = [re.escape(p) for p in clue_a.split("[Y]")]
    value = re.fullmatch("(.+?)".join(pieces), quote_a).group(1)
    assert sum(normalize(value) in normalize(t) for t in texts.values()) == 2
    assert normalize(value) in normalize(texts[first]) and normalize(value) in normalize(
        texts[second]
    )
    assert answer_in_text(task.answer, task.answer_aliases, texts[second])
    assert not answer_in_text(task.answer, task.answer_aliases, texts[first])
    assert not answer_in_text(task.answer, task.answer_aliases, task.query)
    assert_fits_only(clue_a.replace("[Y]", "[X]"), first, texts)
    assert_fits_only(clue_b.replace("[Y]", value), second, texts)
    for doc_id in task.distractor_doc_ids:
        assert doc_id not in task.gold_doc_ids
        assert not answer_in_text(task.answer, task.answer_aliases, texts[doc_id])


def test_templated_records_give_two_hop_relays_through_a_shared_name() -> None:
    docs = templated(91, seed=3)
    tasks, _ = generate_offline(docs, n=30, seed=0)
    relays = [t for t in tasks if t.model_extra["template"] == "relay"]
    assert len(relays) >= 5 and all(t.hops == 2 for t in relays)
    assert_verified_and_unique(relays, docs)


def test_91_short_templated_records_give_verified_tasks() -> None:
    """The corpus the issue names: 91 short templated sentences, untitled or generically titled."""
    for titled in (False, True):
        docs = templated(91, seed=3, titled=titled)
        tasks, report = generate_offline(docs, n=25, seed=0)
        assert len(tasks) == 25 and report.shortfall is None
        assert_verified_and_unique(tasks, docs)
        assert generate_offline(docs, n=25, seed=0)[0] == tasks  # deterministic


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(count=st.integers(8, 40), seed=st.integers(0, 10_000))
def test_templated_tasks_are_never_ambiguous(count: int, seed: int) -> None:
    """However often the records repeat each other, no task's clue fits two values."""
    docs = templated(count, seed)
    tasks, _ = generate_offline(docs, n=count, seed=seed)
    assert_verified_and_unique(tasks, docs)


def test_a_sentence_shared_by_two_records_gives_no_task_for_its_value() -> None:
    shared = "works at Acme Corp in Boston as the night shift supervisor."
    docs = [
        Document(id="a", text=f"Ann Leary {shared}"),
        Document(id="b", text=f"Bob Ramirez {shared}"),
        *templated(20, seed=1),
    ]
    tasks, _ = generate_offline(docs, n=40, seed=0)
    assert tasks
    assert not [t for t in tasks if t.answer in {"Ann Leary", "Bob Ramirez"}]


MESSAGES = [
    (
        "alice.wong@northwind.com",
        "bob.hale@northwind.com",
        "Pipeline outage",
        "Bob, the Carthage compressor station will be down for maintenance on Tuesday.\n"
        "Please move the Dominion volumes to meter 4471 until the repair crew finishes.",
    ),
    (
        "bob.hale@northwind.com",
        "alice.wong@northwind.com",
        "Re: Pipeline outage",
        "Alice, I moved the volumes. Gary Pruitt at Dominion confirmed the change by phone.\n"
        "He asked that we send the revised nomination to scheduling@dominion-energy.com today.",
    ),
    (
        "carla.diaz@northwind.com",
        "team@northwind.com",
        "Holiday party",
        "The holiday party will be held at the Riverside Grill on Friday evening.\n"
        "Tickets are available from Monica Estrada in the finance department on floor nine.",
    ),
    (
        "dan.ortiz@northwind.com",
        "carla.diaz@northwind.com",
        "Re: Holiday party",
        "Carla, can we move the raffle to the start of the evening?\n"
        "Last year half the winners had already left before the drawing at the Riverside Grill.",
    ),
    (
        "erin.moss@northwind.com",
        "legal@northwind.com",
        "Contract review",
        "Legal, please review the gas purchase agreement with Bluebonnet Energy before signing.\n"
        "The counterparty wants the credit terms in section twelve changed to a parental guaranty.",
    ),
    (
        "frank.yu@northwind.com",
        "erin.moss@northwind.com",
        "Re: Contract review",
        "Erin, the guaranty from Bluebonnet Holdings is capped at ten million dollars.\n"
        "Our credit desk under Priya Raman signed off on that amount yesterday afternoon.",
    ),
]


def emails() -> list[Document]:
    """Six short RFC 822 messages in three threads, read by sleuth's e-mail reader."""
    docs = []
    for i, (sender, to, subject, body) in enumerate(MESSAGES):
        raw = (
            f"Message-ID: <{i}.mail@northwind.com>\nFrom: {sender}\nTo: {to}\n"
            f"Date: Fri, 1{i} Jun 2001 09:00:00 -0500\nSubject: {subject}\n\n{body}\n"
        )
        docs.append(parse_message(raw.encode(), f"m{i}.eml", f"m{i}"))
    return docs


def test_emails_give_verified_fact_tasks_never_from_headers() -> None:
    """Subjects are titles, but no message names another's: facts fill what links cannot."""
    docs = emails()
    untitled = [d.model_copy(update={"title": None}) for d in docs]
    few = OfflineConfig(distractors=3, min_distractors=1)  # six messages: few rivals
    for corpus in (docs, untitled):
        tasks, report = generate_offline(corpus, n=12, seed=0, config=few)
        facts = [t for t in tasks if t.model_extra["template"] == "fact"]
        assert len(facts) >= 4 and report.tasks == len(tasks)
        assert_verified_and_unique(tasks, corpus)
        for task in facts:
            assert not re.search(r"(?m)^\s*(From|To|Date|Subject):", task.model_extra["clues"][0])
    answers = {t.answer for t in facts}
    assert answers <= {
        "Bob",
        "Carthage",
        "Dominion",
        "Alice",
        "Gary Pruitt",
        "Riverside Grill",
        "Carla",
        "Monica Estrada",
        "4471",
        "scheduling@dominion-energy.com",
        "Legal",
        "Erin",
        "Bluebonnet Energy",
        "Bluebonnet Holdings",
        "Priya Raman",
        "Tickets",
        "Tuesday",
    }


def test_answer_spans_are_names_addresses_and_identifiers() -> None:
    sentence = "Thanks Gary Pruitt, send it to ops@acme.com by Friday for deal 135714 and Acme."
    assert answer_spans(sentence) == ["Gary Pruitt", "ops@acme.com", "135714", "Acme"]
    assert answer_spans("Million thanks to the Interim team.", {"million", "interim"}) == []
