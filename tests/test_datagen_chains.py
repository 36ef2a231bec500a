"""The generator's ``chain`` template: 3- and 4-hop tasks along title mentions, and the packaged
generated QA tasks (training-side paragraphs only)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sleuth.cli import app
from sleuth.corpus.models import Document
from sleuth.datagen import OfflineConfig, generate_chains
from sleuth.datagen.evidence import answer_in_text
from sleuth.datagen.offline.chains import draft_chain
from sleuth.datagen.offline.corpus import Corpus
from sleuth.datagen.offline.templates import Draft
from sleuth.index import Index
from sleuth.tasks import Task, load_tasks, read_benchmark
from sleuth.tasks.split import split_tasks
from sleuth.train.recipes.data import STAGED, generated_tasks

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# A path of mentions: Varnay -> The Glass Orchard -> Teodor Brasch -> Lanvelle -> Sarbec Abbey.
CHAIN = {
    "varnay": (
        "Odile Varnay",
        "Odile Varnay (born 1950) is a Walloon novelist and playwright whose best known "
        "book is the wartime novel The Glass Orchard, set among apple growers near Liège.",
    ),
    "orchard": (
        "The Glass Orchard",
        "The Glass Orchard is a 1979 novel by Odile Varnay. It was adapted into a "
        "prize-winning war film by Teodor Brasch in 1983, shot in black and white.",
    ),
    "brasch": (
        "Teodor Brasch",
        "Teodor Brasch (1931–2001) was a Belgian film director. He was born in the "
        "hill village of Lanvelle on the river Ourthe and trained as a cameraman.",
    ),
    "lanvelle": (
        "Lanvelle",
        "Lanvelle is a small village in the province of Namur. Above it stand the "
        "ruined walls of Sarbec Abbey, a Cistercian house founded by monks from Clairvaux.",
    ),
    "sarbec": (
        "Sarbec Abbey",
        "Sarbec Abbey is a ruined Cistercian monastery in Belgium, abandoned in 1796.",
    ),
}
OTHERS = {
    "sollen": ("Marte Sollen", "Marte Sollen is a Walloon poet and novelist born near Liège."),
    "ambrun": ("Kees Ambrun", "Kees Ambrun was a Belgian film director of silent comedies."),
    "meadow": ("The Iron Meadow", "The Iron Meadow is a 1982 war novel about apple growers."),
    "durbuy": ("Hamoir", "Hamoir is a village on the river Ourthe in the province of Liège."),
    "orval": ("Orval Abbey", "Orval Abbey is a Cistercian monastery founded in 1132."),
    "lens": ("Paul Lens", "Paul Lens was a Belgian cameraman who shot black and white films."),
}


def _docs() -> list[Document]:
    return [Document(id=i, title=t, text=x) for i, (t, x) in (CHAIN | OTHERS).items()]


def _names_next(task: Task, texts: dict[str, str], titles: dict[str, str]) -> None:
    """Each gold document names the next one's title; the last one holds the answer."""
    gold = task.gold_doc_ids
    for here, there in zip(gold, gold[1:], strict=False):
        assert re.search(re.escape(titles[there]), texts[here]), (here, there)
    assert answer_in_text(task.answer, task.answer_aliases, texts[gold[-1]])
    assert not answer_in_text(task.answer, task.answer_aliases, task.query)
    assert not any(titles[d] in task.query for d in gold)


def test_a_three_hop_chain_walks_the_mentions() -> None:
    docs = _docs()
    tasks, report = generate_chains(docs, 5, seed=0, hops=(3,), config=OfflineConfig())
    assert tasks, report.shortfall
    texts, titles = {d.id: d.text for d in docs}, {d.id: str(d.title) for d in docs}
    for task in tasks:
        assert task.hops == 3 and len(task.gold_doc_ids) == 3
        assert (task.model_extra or {})["template"] == "chain"
        _names_next(task, texts, titles)
    first = next(t for t in tasks if t.gold_doc_ids[0] == "varnay")
    assert first.gold_doc_ids == ["varnay", "orchard", "brasch"] and first.answer == "Lanvelle"
    # the answer's own article holds the answer, so it is never a distractor
    assert "lanvelle" not in first.distractor_doc_ids
    assert generate_chains(docs, 5, seed=0, hops=(3,))[0] == tasks  # deterministic


def test_a_four_hop_chain_masks_every_name_on_the_path() -> None:
    corpus = Corpus.build(_docs(), OfflineConfig())
    sentence = {(link.source, link.target): link.sentence for link in corpus.links}
    path = ("varnay", "orchard", "brasch", "lanvelle", "sarbec")
    sentences = tuple(sentence[pair] for pair in zip(path, path[1:], strict=False))
    draft = draft_chain(path, sentences, corpus, OfflineConfig())
    assert isinstance(draft, Draft), draft
    assert draft.hops == 4 and draft.gold == path[:-1] and draft.answer.title == "Sarbec Abbey"
    assert [c.count("[Y") + c.count("[X]") > 0 for c in draft.clues] == [True] * 5
    assert "[Y4]" in draft.clues[-1] or "[X]" in draft.clues[-1]
    for name in ("Varnay", "Glass Orchard", "Brasch", "Lanvelle", "Sarbec"):
        assert name not in draft.query
    assert draft.clues[2].startswith("prize-winning war film by [Y3]")


def test_cli_makes_chains_from_an_index(tmp_path: Path) -> None:
    Index.create(tmp_path / "ix", embedder="hash:64").ingest(_docs())
    out = tmp_path / "chains.jsonl"
    argv = ["datagen", "offline", "--index", str(tmp_path / "ix"), "--out", str(out)]
    result = CliRunner().invoke(app, [*argv, "--n", "3", "--chains", "3,4"])
    assert result.exit_code == 0, (result.stdout, result.stderr)
    tasks = load_tasks(out)
    assert {t.hops for t in tasks} == {3, 4}
    assert all((t.model_extra or {})["template"] == "chain" for t in tasks)


def test_chains_refuse_fewer_than_two_hops() -> None:
    with pytest.raises(ValueError, match="hops"):
        generate_chains(_docs(), 5, hops=(1,))


def test_packaged_generated_tasks_use_training_side_paragraphs_only() -> None:
    tasks = generated_tasks()
    assert len(tasks) >= 100 and len({t.id for t in tasks}) == len(tasks)
    assert {t.hops for t in tasks} >= {2, 3, 4}
    for name, (_, folder, source) in STAGED.items():
        if not (SHARED_DATA / folder).is_dir():
            pytest.skip(f"shared sample {folder} not found")
        _, questions = read_benchmark(SHARED_DATA / folder)
        heldout = split_tasks([q for q in questions if q.source == source])[1]
        dev = {d for q in heldout for d in (*q.gold_doc_ids, *q.distractor_doc_ids)}
        mine = [t for t in tasks if t.source == source]
        assert mine, name
        for task in mine:  # a held-out question's pool never feeds a generated task
            assert not dev & {*task.gold_doc_ids, *task.distractor_doc_ids}, task.id
