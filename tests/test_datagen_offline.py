"""The LLM-free generator: masking helpers, templates, the quality report, and real-corpus runs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from sleuth.corpus.models import Document
from sleuth.datagen import generate_offline, render_markdown
from sleuth.datagen.evidence import QuoteEvidence, answer_in_text, verify_extraction
from sleuth.datagen.offline.config import OFFLINE_GENERATOR, OfflineConfig
from sleuth.datagen.offline.corpus import Corpus, Link
from sleuth.datagen.offline.masking import (
    DECADE,
    NUMBER,
    YEAR,
    birth_year,
    infer_kind,
    mask_text,
    profile_document,
    split_sentences,
)
from sleuth.datagen.offline.templates import Draft, draft_bridge
from sleuth.datagen.quality import StageTally, build_report
from sleuth.datagen.quotes import quote_in_source
from sleuth.tasks import Task, load_tasks, read_benchmark

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WIKI2 = SHARED_DATA / "2wikimultihopqa_dev"
PACKAGE_DATA = Path(str(resources.files("sleuth") / "data"))
PACKAGED_CORPUS = PACKAGE_DATA / "benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"
PACKAGED_TASKS = PACKAGE_DATA / "tasks/2wiki_offline_tasks.jsonl"
# How the packaged task file was made (see its README.md); the test below regenerates it.
PACKAGED_N, PACKAGED_SEED = 250, 0


# --- masking helpers -------------------------------------------------------------------------


def test_split_sentences_keeps_abbreviations_and_initials() -> None:
    text = (
        'Dr. Smith met J. R. R. Tolkien in the U.S. in 1950. He left. She said "yes." Then\n\nEnd'
    )
    sentences = [text[s:e] for s, e in split_sentences(text)]
    assert sentences == [
        "Dr. Smith met J. R. R. Tolkien in the U.S. in 1950.",
        "He left.",
        'She said "yes."',
        "Then",
        "End",
    ]


def _doc(doc_id: str, title: str, text: str) -> Document:
    return Document(id=doc_id, title=title, text=text)


def test_mask_text_hides_names_years_and_numbers() -> None:
    person = profile_document(
        _doc("jw", "Jane Wigham", "Jane Mary Wigham( 1801–1888) was a Scottish abolitionist.")
    )
    assert person is not None and person.kind == "person"
    assert "Jane Mary Wigham" in person.names  # the fuller form the text opens with
    text = (
        "Jane Mary Wigham( 1801–1888) met Eliza Wigham in the 1830s; Wigham gave 3.5 pounds to "
        "JANE WIGHAM's 2nd cause."
    )
    assert mask_text(text, [(person, "[X]")]) == (
        f"[X]( {YEAR}–{YEAR}) met Eliza Wigham in the {DECADE}; [X] gave {NUMBER} pounds to "
        f"[X]'s {NUMBER} cause."
    )


def test_mask_text_tolerates_dash_and_spacing_variants() -> None:
    film = profile_document(_doc("w", "Polish-Russian War (film)", "Polish-Russian War is a film."))
    assert film is not None and film.names == ("Polish-Russian War (film)", "Polish-Russian War")
    assert mask_text("the Polish \u2013 Russian  War novel", [(film, "[X]")]) == "the [X] novel"


@pytest.mark.parametrize(
    ("title", "first_sentence", "kind"),
    [
        ("A", "A( born 7 August 1998), is a Japanese footballer.", "person"),  # life dates
        ("A", "A (Russian: Б; born 15 December 1993) is a goalkeeper.", "person"),
        ("A", "A is a Pakistani fashion and costume designer, also a judge.", "person"),
        ("A", "A is a 2009 Polish film directed by B.", "film"),
        ("A", 'A is a 1943 film made by the team of" B"( 1943).', "film"),  # dates after "is a"
        ("A", "A is an annual documentary film festival set in Leuven.", "festival"),  # head noun
        ("A", "A is a census-designated place (CDP) in Pulaski County.", "place"),
        ("A", "A is the eighth of 16 Charlie Chan films.", "film"),  # plural, past the phrase
        ("A (album)", "A was recorded in 1990.", "album"),  # the title's parenthetical
        ("A", "A was recorded in 1990.", "entity"),
    ],
)
def test_infer_kind(title: str, first_sentence: str, kind: str) -> None:
    assert infer_kind(title, first_sentence) == kind


@pytest.mark.parametrize(
    ("text", "year"),
    [
        ("A B( born March 10, 1968) is a boxer.", 1968),
        ("A B( 18 November 1846 – 25 March 1920) was a prince.", 1846),
        ("A B (1927 – 19 December 2012) was a producer.", 1927),
        ("A B( 25 November 191816 March 1972) was a princess.", None),  # garbled dates
        ("A B( – 20 October 1787) was a bishop.", None),  # birth unknown
        ("A B( 1176? – 11 June 1216) was an emperor.", None),  # uncertain
    ],
)
def test_birth_year(text: str, year: int | None) -> None:
    entity = profile_document(_doc("ab", "A B", text))
    assert entity is not None
    assert birth_year(entity, text) == year


# --- templates on a small corpus -------------------------------------------------------------

_DIRECTOR = _doc(
    "zq",
    "Zorba Quintell",
    "Zorba Quintell( born 4 May 1931) is a Maltese film director, painter and sculptor.",
)


def _film(doc_id: str, title: str, writer: str) -> Document:
    text = (
        f"{title} is a 1950 Maltese drama film directed by Zorba Quintell and written by {writer}."
    )
    return _doc(doc_id, title, text)


def _bridge(writers: tuple[str, str]) -> Draft | str:
    docs = [
        _DIRECTOR,
        _film("f1", "Harbour Lights", writers[0]),
        _film("f2", "Salt Wind", writers[1]),
    ]
    config = OfflineConfig(min_rare_words=0)
    corpus = Corpus.build(docs, config)
    assert Link("f1", "zq", 0) in corpus.links
    return draft_bridge(Link("f1", "zq", 0), corpus, config)


def test_bridge_reaches_the_answer_through_the_bridge_document() -> None:
    draft = _bridge(("Ann Lee", "Bob Roe"))
    assert isinstance(draft, Draft)
    assert draft.gold == ("zq", "f1") and draft.answer.title == "Harbour Lights"
    assert draft.clues == (
        f"[Y]( born {NUMBER} May {YEAR}) is a Maltese film director, painter and sculptor.",
        "drama film directed by [Y] and written by Ann",
    )
    assert "Zorba" not in draft.query and "Harbour" not in draft.query


def test_bridge_refuses_a_phrase_that_another_document_shares() -> None:
    # Both films were "directed by Zorba Quintell and written by Ann": the clue fits either.
    assert _bridge(("Ann Lee", "Ann Lee")) == "ambiguous_link_window"


def test_config_checks_how_settings_fit() -> None:
    with pytest.raises(ValueError, match="lower min_distractors"):
        OfflineConfig(distractors=2, min_distractors=3)
    with pytest.raises(ValueError, match="non-negative shares"):
        OfflineConfig(mix=(1.0, -1.0, 0.0))


# --- quality report --------------------------------------------------------------------------


def test_quality_report_counts_reasons_and_rechecks_distractors() -> None:
    tally = StageTally("verify")
    assert tally.record([])
    assert not tally.record(["quote_not_found: d1: 'x'", "quote_not_found: d2: 'y'"])
    assert not tally.record(["answer_not_in_gold: 'Paris'"])
    tasks = [
        Task(id="t1", query="q", answer="Paris", hops=1, distractor_doc_ids=["clean", "bad"]),
        Task(id="t2", query="q", answer="Rome", hops=2, distractor_doc_ids=["clean"]),
    ]
    documents = {"clean": "Nothing to see.", "bad": "A trip to Paris."}
    report = build_report(tasks, [tally], documents, generator="g", source="s", seed=0)
    stage = report.stages[0]
    assert (stage.attempted, stage.passed) == (3, 1)
    assert stage.reasons == {"answer_not_in_gold": 1, "quote_not_found": 1}  # once per candidate
    assert report.answer_in_distractor_rate == pytest.approx(1 / 3)  # the check is not vacuous
    assert report.hop_histogram == {1: 1, 2: 1}
    assert report.overall.leakage_rate is None  # no task carries the flag: unknown, not 0
    assert "| verify | 3 | 1 | 33.3% |" in render_markdown(report)


# --- real corpora ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wiki2_run():
    if not WIKI2.is_dir():
        pytest.skip(f"shared 2WikiMultihopQA sample not found at {WIKI2}")
    docs, _ = read_benchmark(WIKI2)
    tasks, report = generate_offline(docs, n=250, seed=0)
    return {d.id: d.text for d in docs}, tasks, report


def test_real_corpus_yields_verified_multi_hop_tasks(wiki2_run) -> None:
    texts, tasks, report = wiki2_run
    print("\n" + render_markdown(report))  # the leakage rate, visible with pytest -s
    assert len(tasks) >= 200
    assert {1, 2} <= {t.hops for t in tasks}
    assert report.answer_in_distractor_rate == 0.0
    rates = report.overall
    assert rates.leakage_rate is not None and 0.0 <= rates.leakage_rate <= 1.0
    # Bridges are found through their first hop: the answer's document is rarely the top hit.
    bridge = report.by_template["bridge"]
    assert bridge.answer_leakage_rate is not None and bridge.answer_leakage_rate < 0.5
    assert report.tasks == len(tasks) and report.stages[-1].passed == len(tasks)
    assert len({t.id for t in tasks}) == len(tasks)


def test_every_real_task_passes_the_verifier_again(wiki2_run) -> None:
    texts, tasks, _ = wiki2_run
    for task in tasks:
        _assert_verified(task, texts)


def _assert_verified(task: Task, texts: dict[str, str]) -> None:
    extra = task.model_extra or {}
    assert extra["generator"] == OFFLINE_GENERATOR and task.domain == "wiki"
    # Clue i is backed by the quote of gold document i (hop order).
    extraction = {
        doc_id: [QuoteEvidence(quote=extra["gold_quotes"][doc_id][0], clue_indices=[i])]
        for i, doc_id in enumerate(task.gold_doc_ids)
    }
    gold = {d: texts[d] for d in task.gold_doc_ids}
    result = verify_extraction(
        gold, extra["clues"], task.answer, task.answer_aliases, extraction, question=task.query
    )
    assert result.passed, (task.id, result.reasons)
    for doc_id, quotes in extra["gold_quotes"].items():
        assert all(quote_in_source(q, texts[doc_id]) for q in quotes)
    assert not answer_in_text(task.answer, task.answer_aliases, task.query)
    assert task.distractor_doc_ids and not set(task.distractor_doc_ids) & set(task.gold_doc_ids)
    for doc_id in task.distractor_doc_ids:
        assert not answer_in_text(task.answer, task.answer_aliases, texts[doc_id])
    assert extra["bm25_top1_gold"] == (1 in extra["bm25_gold_ranks"])


def test_generation_depends_on_the_seed_only(wiki2_run) -> None:
    texts, tasks, _ = wiki2_run
    docs = [Document(id=i, title=None, text=t) for i, t in texts.items()]
    untitled, _ = generate_offline(docs, n=10, seed=0)  # no titles: no links; facts, relays
    assert len(untitled) == 10 and {t.model_extra["template"] for t in untitled} <= {
        "fact",
        "relay",
    }
    assert generate_offline(docs, n=10, seed=0, config=OfflineConfig(facts=False))[0] == []
    again, _ = generate_offline(read_benchmark(WIKI2)[0], n=30, seed=1)
    assert [t.id for t in again] != [t.id for t in tasks[:30]]


def test_packaged_task_file_is_verified_and_reproducible() -> None:
    docs, _ = read_benchmark(PACKAGED_CORPUS)
    texts = {d.id: d.text for d in docs}
    packaged = load_tasks(PACKAGED_TASKS)
    assert len(packaged) >= 200 and {1, 2} <= {t.hops for t in packaged}
    for task in packaged:
        _assert_verified(task, texts)
    regenerated, _ = generate_offline(docs, n=PACKAGED_N, seed=PACKAGED_SEED)
    assert regenerated == packaged
