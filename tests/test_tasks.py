"""Task schema, JSONL round trip, and the benchmark readers (synthetic and real files)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleuth.corpus import doc_id_of
from sleuth.errors import InputError
from sleuth.tasks import (
    Task,
    load_tasks,
    read_2wiki,
    read_benchmark,
    read_hotpotqa,
    read_musique,
    save_tasks,
    title_doc_id,
)
from sleuth.tasks.benchmarks import detect_format

DATA = Path(__file__).parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"shared data samples not found at {DATA} (see SPEC: shared/data)"
)


# --- schema and JSONL ------------------------------------------------------------------------


def test_round_trip_keeps_extra_fields(tmp_path):
    tasks = [
        Task(
            id="t1", query="q?", answer="A", gold_doc_ids=["d1"], generator="offline", clues=["c"]
        ),
        Task(id="t2", query="r?", answer="B", gold_chunk_groups=[["d2_0", "d3_4"]], hops=3),
    ]
    path = tmp_path / "tasks.jsonl"
    save_tasks(path, tasks)
    assert load_tasks(path) == tasks
    first = json.loads(path.read_text().splitlines()[0])
    assert first["schema_version"] == 1 and first["generator"] == "offline"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tasks.jsonl"]  # no temp file left


def test_spec_fields_and_defaults():
    task = Task(id="t", query="q", answer="a")
    spec = "id query answer answer_aliases gold_doc_ids gold_chunk_groups distractor_doc_ids"
    assert set(Task.model_fields) >= {*spec.split(), "domain", "hops", "source", "schema_version"}
    assert (task.answer_aliases, task.gold_doc_ids, task.hops) == ([], [], 1)


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (['{"id": "a", "query": "q", "answer": "x"}', "{not json"], "line 2: invalid JSON"),
        (['{"id": "a", "answer": "x"}'], "line 1: invalid task (query"),
        (['{"id": "a", "query": "q", "answer": "x", "hops": 0}'], "line 1: invalid task (hops"),
        (['{"id": "a", "query": "q", "answer": "x", "schema_version": 9}'], "newer than"),
        (['{"id": "a", "query": "q", "answer": "x", "gold_chunk_groups": [[]]}'], "empty group"),
        (['["a list"]'], "line 1: invalid task"),
        (['{"id": "a", "query": "q", "answer": "x"}'] * 2, "line 2: duplicate task id 'a'"),
    ],
)
def test_bad_task_lines_name_file_and_line(tmp_path, lines, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        load_tasks(path)
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_blank_lines_are_skipped_and_missing_file_is_input_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('\n{"id": "a", "query": "q", "answer": "x"}\n\n')
    assert [t.id for t in load_tasks(path)] == ["a"]
    with pytest.raises(InputError, match="cannot read"):
        load_tasks(tmp_path / "missing.jsonl")


# --- document ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Apollo 11", "apollo-11"),
        ("Xawery Żuławski", "xawery-zulawski"),
        ("Polish-Russian War (film)", "polish-russian-war-film"),
        ("Snow_White 1955", "snow-white-1955"),
    ],
)
def test_title_doc_id(title, slug):
    assert title_doc_id(title) == slug


def test_title_without_latin_letters_gets_a_hash_id():
    assert title_doc_id("東京").startswith("doc-")
    assert title_doc_id("東京") != title_doc_id("大阪")


@given(st.text(min_size=1, max_size=40))
def test_doc_ids_survive_chunk_suffix_stripping(title):
    slug = title_doc_id(title)
    assert slug and doc_id_of(slug) == slug and doc_id_of(f"{slug}_12") == slug


# --- readers on synthetic files --------------------------------------------------------------


def _hotpot(qid, question, answer, gold, context, qtype="bridge"):
    return {
        "_id": qid,
        "question": question,
        "answer": answer,
        "type": qtype,
        "level": "hard",
        "supporting_facts": [[t, 0] for t in gold],
        "context": context,
    }


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_hotpotqa_pools_titles_and_resolves_slug_collisions(tmp_path):
    shared = ["Paris", ["Paris is the capital", " of France."]]
    anime = ["Romeo × Juliet", ["An anime."]]
    data = [
        _hotpot("q1", "Q1?", "France", ["Paris"], [shared, ["Romeo + Juliet", ["A film."]]]),
        _hotpot("q2", "Q2?", "no", ["Romeo × Juliet", "Paris"], [anime, shared], "comparison"),
    ]
    docs, tasks = read_hotpotqa(_write(tmp_path / "h.json", data))
    by_title = {d.title: d for d in docs}
    assert len(docs) == 3
    assert by_title["Paris"].id == "paris"
    assert by_title["Paris"].text == "Paris is the capital of France."
    assert by_title["Paris"].metadata == {"source": "hotpotqa", "domain": "wiki"}
    romeo_ids = {by_title["Romeo + Juliet"].id, by_title["Romeo × Juliet"].id}
    assert len(romeo_ids) == 2 and all(i.startswith("romeo-juliet-") for i in romeo_ids)
    q1, q2 = tasks
    assert (q1.gold_doc_ids, q1.distractor_doc_ids) == (["paris"], [by_title["Romeo + Juliet"].id])
    assert q2.gold_doc_ids == [by_title["Romeo × Juliet"].id, "paris"]
    assert (q2.hops, q2.domain, q2.source, q2.question_type) == (
        2,
        "wiki",
        "hotpotqa",
        "comparison",
    )


def _para(idx: int, title: str, text: str, gold: bool = False) -> dict:
    return {"idx": idx, "title": title, "paragraph_text": text, "is_supporting": gold}


def _step(step_id: int, support_idx: int) -> dict:
    return {"id": step_id, "question": "q", "answer": "a", "paragraph_support_idx": support_idx}


def _musique_record(qid="3hop1__1_2_3", answerable=True):
    paragraphs = [
        _para(0, "Kobe", "Kobe was born in 1978.", gold=True),
        _para(1, "Kobe", "Kobe played for the Lakers."),
        _para(2, "Kobe", "kobe  was born in 1978"),  # same paragraph, other spacing/punctuation
        _para(3, "Lakers", "The Lakers are in LA.", gold=True),
    ]
    return {
        "id": qid,
        "question": "Q?",
        "answer": "LA",
        "answer_aliases": ["Los Angeles"],
        "answerable": answerable,
        "paragraphs": paragraphs,
        "question_decomposition": [_step(1, 3), _step(2, 0)],
    }


def test_musique_merges_paragraphs_and_orders_gold_by_hop(tmp_path):
    data = {"data": [_musique_record(), _musique_record("2hop__9_9", answerable=False)]}
    docs, tasks = read_musique(_write(tmp_path / "m.json", data))
    kobe = next(d for d in docs if d.id == "kobe")
    assert kobe.text == "Kobe was born in 1978.\n\nKobe played for the Lakers."
    assert [t.id for t in tasks] == ["3hop1__1_2_3"]  # the unanswerable one is skipped
    task = tasks[0]
    assert task.gold_doc_ids == ["lakers", "kobe"]
    assert (task.hops, task.answer_aliases, task.source) == (3, ["Los Angeles"], "musique")


def test_musique_jsonl_is_read_and_detected(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(_musique_record()) + "\n")
    docs, tasks = read_benchmark(path)
    assert len(docs) == 2 and tasks[0].gold_doc_ids == ["lakers", "kobe"]


def test_original_2wiki_format_is_detected_with_hops_by_type(tmp_path):
    ctx = [["A", ["a."]], ["B", ["b."]], ["C", ["c."]], ["D", ["d."]]]
    record = _hotpot("w1", "Which?", "A", ["A", "B", "C", "D"], ctx, qtype="bridge_comparison")
    path = _write(tmp_path / "dev.json", [record | {"evidences": []}])
    assert detect_format(json.loads(path.read_text())) == "2wiki"
    docs, tasks = read_benchmark(path)
    assert (tasks[0].source, tasks[0].hops) == ("2wikimultihopqa", 4)
    assert read_2wiki(path)[1] == tasks


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([_hotpot("q1", "Q?", "x", ["Missing"], [["Other", ["t."]]])], "record q1: gold title"),
        ([{"_id": "q2", "question": "Q?", "context": [], "supporting_facts": []}], "record q2"),
        ([{"something": "else"}], "unrecognised benchmark record"),
        ({"data": []}, "non-empty list"),
    ],
)
def test_malformed_benchmark_files_name_file_and_record(tmp_path, data, needle):
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(InputError) as err:
        read_benchmark(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_conflicting_duplicate_task_ids_are_rejected(tmp_path):
    ctx = [["A", ["a."]]]
    _write(tmp_path / "1.json", [_hotpot("q", "Q?", "x", ["A"], ctx)])
    _write(tmp_path / "2.json", [_hotpot("q", "Q?", "y", ["A"], ctx)])
    with pytest.raises(InputError, match="different content"):
        read_hotpotqa(tmp_path)


# --- readers on the real samples -------------------------------------------------------------


def _check_corpus(docs, tasks):
    ids = [d.id for d in docs]
    assert len(ids) == len(set(ids))
    assert all(doc_id_of(i) == i and doc_id_of(f"{i}_0") == i for i in ids)
    assert len({d.title for d in docs}) == len(docs)
    known = set(ids)
    assert all(g in known for t in tasks for g in t.gold_doc_ids + t.distractor_doc_ids)
    assert all(t.gold_doc_ids and t.domain == "wiki" for t in tasks)


@needs_data
@pytest.mark.parametrize(
    ("name", "count"), [("hotpotqa200.json", 200), ("hotpot_dev_distractor_v1_100.json", 103)]
)
def test_real_hotpotqa_files(name, count):
    docs, tasks = read_hotpotqa(DATA / "hotpotqa_distractor_dev" / name)
    assert len(tasks) == count
    _check_corpus(docs, tasks)
    assert {t.hops for t in tasks} == {2}


@needs_data
def test_real_hotpotqa_folder_pools_both_files():
    docs, tasks = read_benchmark(DATA / "hotpotqa_distractor_dev")
    assert len(tasks) == 298  # 200 + 103 with 5 identical repeats
    _check_corpus(docs, tasks)
    first = next(t for t in tasks if t.id == "5a8b57f25542995d1e6f1371")
    assert first.query == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert first.gold_doc_ids == ["scott-derrickson", "ed-wood"] and first.answer == "yes"
    assert len(first.distractor_doc_ids) == 8


@needs_data
def test_real_musique_sample():
    path = DATA / "musique_ans_dev" / "musique_200_test.json"
    docs, tasks = read_musique(path)
    assert len(tasks) == 200
    _check_corpus(docs, tasks)
    assert Counter(t.hops for t in tasks) == {2: 102, 3: 72, 4: 26}
    assert sum(bool(t.answer_aliases) for t in tasks) == 62
    text_of = {d.id: d.text for d in docs}
    for record, task in zip(json.loads(path.read_text())["data"], tasks, strict=True):
        gold_texts = [p["paragraph_text"] for p in record["paragraphs"] if p["is_supporting"]]
        joined = "\n".join(text_of[g] for g in task.gold_doc_ids)
        assert all(text in joined for text in gold_texts), task.id


@needs_data
def test_real_2wiki_flashrag_sample():
    path = DATA / "2wikimultihopqa_dev" / "2wikimultihopqa_dev_200.jsonl"
    docs, tasks = read_2wiki(path)
    assert len(tasks) == 200
    _check_corpus(docs, tasks)
    assert Counter(t.hops for t in tasks) == {2: 160, 4: 40}
    first = tasks[0]
    assert (first.id, first.answer) == ("dev_0", "Małgorzata Braunek")
    assert first.gold_doc_ids == ["polish-russian-war-film", "xawery-zulawski"]
    fu_manchu = next(t for t in tasks if t.answer == "The Mask Of Fu Manchu")
    assert fu_manchu.answer_aliases == ["Mask of Fu Manchu", "The Mask of Fu Manchu"]
    assert read_benchmark(path)[1] == tasks
