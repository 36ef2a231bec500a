"""benchmarks/quality.py on a tiny real index: rows, held-out filtering, deltas, output, errors."""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib import resources
from pathlib import Path
from statistics import mean

import pytest

from sleuth.corpus import Document
from sleuth.errors import InputError
from sleuth.io import read_jsonl
from sleuth.ranking.model import load_ranker
from sleuth.tasks import read_2wiki
from sleuth.tools.toolbox import Toolbox

from .conftest import PACKAGED_2WIKI

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "quality.py"
_spec = importlib.util.spec_from_file_location("quality_bench", SCRIPT)
quality = sys.modules.setdefault("quality_bench", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(quality)  # registered first: its dataclass looks its module up


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The pooled paragraphs of the first 6 packaged 2Wiki questions, indexed with MiniLM."""
    docs, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    tasks = tasks[:6]
    wanted = {d for t in tasks for d in [*t.gold_doc_ids, *t.distractor_doc_ids]}
    docs = [d for d in docs if d.id in wanted]
    path = tmp_path_factory.mktemp("quality") / "index"
    return docs, tasks, quality.open_index(path, docs, "minilm"), path


def r_at_5(record: dict) -> float:
    """Recall@5 recomputed from the record's final list, independently of sleuth.metrics."""
    gold = set(record["gold_doc_ids"])
    return len(gold & set(record["final_docs"][:5])) / len(gold)


def test_rows_exclude_training_questions_and_compare_to_single_pass(tiny, tmp_path):
    docs, tasks, index, _ = tiny
    corpus = quality.Corpus("combined", docs, {"A": tasks[:3], "B": tasks[3:]})
    trained = {tasks[0].id}
    rows = quality.evaluate(
        corpus,
        index,
        ["single-pass", "bm25"],
        tmp_path,
        train_ids=trained,
        limit=2,
        concurrency=2,
    )
    assert [(r["dataset"], r["policy"]) for r in rows] == [
        ("combined/A", "single-pass"),
        ("combined/B", "single-pass"),
        ("combined/A", "bm25"),
        ("combined/B", "bm25"),
    ]
    assert [(r["n"], r["excluded"]) for r in rows] == [(2, 1), (2, 0)] * 2
    ran = {r["task_id"] for r in read_jsonl(tmp_path / "single-pass" / "results.jsonl")}
    assert ran == {tasks[1].id, tasks[2].id, tasks[3].id, tasks[4].id}  # never the trained one
    by_id = {
        policy: {r["task_id"]: r for r in read_jsonl(tmp_path / policy / "results.jsonl")}
        for policy in ["single-pass", "bm25"]
    }
    for r in rows:
        asked = [tasks[1], tasks[2]] if r["dataset"] == "combined/A" else [tasks[3], tasks[4]]
        mine = [by_id[r["policy"]][t.id] for t in asked]
        assert r["recall_at_5"] == pytest.approx(mean(r_at_5(m) for m in mine))
        low, high = r["ci"]["recall_at_5"]
        assert min(map(r_at_5, mine)) <= low <= r["recall_at_5"] <= high
        assert set(r["ci"]) == {"recall_at_2", "recall_at_5", "final_answer_found"}
        if r["policy"] == "single-pass":
            assert r["delta"] == {}
        else:
            base = [by_id["single-pass"][t.id] for t in asked]
            expected = mean(r_at_5(m) - r_at_5(b) for m, b in zip(mine, base, strict=True))
            diff, low, high = r["delta"]["recall_at_5"]
            assert diff == pytest.approx(expected) and low <= diff <= high
            assert set(r["delta"]) == set(r["ci"])
    md = quality.markdown(rows, quality.header_line(rows))
    assert "combined/A 2 evaluated, 1 excluded" in md
    assert "| HippoRAG 2 | 74.7 | 90.4 | 96.3 |" in md
    assert md.count("| combined/") == 4


def test_index_of_other_documents_is_refused(tiny):
    docs, _, _, path = tiny
    with pytest.raises(InputError, match="other documents"):
        quality.open_index(path, docs[:-1], "minilm")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--datasets", "HotpotQA,TriviaQA"], "unknown dataset"),
        (["--policies", "single-pass,oracle"], "unknown policy"),
        (["--questions", "0"], "--questions"),
        (["--train-ids", "{ids}"], "question_ids"),
        (["--adapt", "2"], "--adapt"),
        (["--adapt", "8", "--adapt-learners", "forest"], "unknown learner"),
    ],
)
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(args, message, tmp_path, capsys):
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"question_ids": "not a list"}))
    out = tmp_path / "out"
    argv = [a.replace("{ids}", str(ids)) for a in args] + ["--out", str(out)]
    assert quality.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_adapt_adds_the_adapted_row_and_keeps_heuristic_on_the_shipped_ranker(tiny, tmp_path):
    args = quality.parse_args(["--adapt", "8", "--policies", "single-pass,heuristic"])
    assert args.policies == ["single-pass", "heuristic", quality.ADAPTED]
    per_learner = ["--adapt", "8", "--adapt-learners", "linear,gbdt", "--policies", "heuristic"]
    rows = [f"{quality.ADAPTED}-linear", f"{quality.ADAPTED}-gbdt"]
    assert quality.parse_args(per_learner).policies == ["heuristic", *rows]
    _, _, index, path = tiny
    shipped = load_ranker(None)
    planted = shipped.model_copy(update={"question_ids": ["planted"]})
    planted.save(path / "ranker.json")  # as `sleuth adapt` stores it
    kept = shipped.model_copy(update={"question_ids": ["kept"]})
    kept.save(tmp_path / f"adapt-{path.name}-gbdt.json")  # as --adapt-learners keeps it
    try:
        for policy, wanted in (("heuristic", shipped), (quality.ADAPTED, planted), (rows[1], kept)):
            tools, _ = quality.built_policy(policy, index, tmp_path).for_tools(Toolbox(index))
            assert tools.ranker == wanted, policy
    finally:
        (path / "ranker.json").unlink()


def test_training_ids_file_is_read(tmp_path):
    ids = tmp_path / "meta.json"
    ids.write_text(json.dumps({"question_ids": ["q1", "q2"], "other": 1}))
    assert quality.parse_args(["--train-ids", str(ids)]).train == {"q1", "q2"}
    assert quality.read_train_ids(None) == set()


def test_command_line_writes_markdown_and_json(tmp_path, monkeypatch, capsys):
    """The whole script on a 4-question 2Wiki file: table, anchors and JSON rows agree."""
    lines = resources.files("sleuth").joinpath(PACKAGED_2WIKI).read_text().splitlines()[:4]
    sample = tmp_path / "wiki.jsonl"
    sample.write_text("\n".join(lines) + "\n")
    datasets = {"2Wiki": (read_2wiki, sample, "2wikimultihopqa")}
    monkeypatch.setattr(sys.modules["_datasets"], "DATASETS", datasets)
    monkeypatch.setattr(quality, "TRAIN_IDS", tmp_path / "no-ranker.json")  # nothing excluded
    out, json_path = tmp_path / "out", tmp_path / "rows" / "quality.json"
    argv = ["--datasets", "2Wiki", "--policies", "single-pass", "--out", str(out)]
    assert quality.main([*argv, "--json", str(json_path), "--questions", "3"]) == 0
    rows = json.loads(json_path.read_text())["rows"]
    assert [(r["dataset"], r["policy"], r["n"]) for r in rows] == [("2Wiki", "single-pass", 3)]
    md = (out / "quality.md").read_text()
    assert f"| 2Wiki | single-pass | 3 | {100 * rows[0]['recall_at_2']:.1f} |" in md
    assert "| BM25 | 43.5 | 65.3 | 74.8 |" in md
    assert "2Wiki 3 evaluated, 0 excluded" in capsys.readouterr().out


def test_pooled_corpus_adds_passages_without_losing_gold_text_or_ids():
    datasets = sys.modules["_datasets"]
    docs = [
        Document(id="ed-wood", title="Ed Wood", text="Ed Wood was a director."),
        Document(id="teutberga", title="Teutberga", text="Teutberga was a queen."),
    ]
    passages = [
        ("Teutberga", "Teutberga was a queen."),  # already there: nothing added
        ("Ed Wood", "He directed Plan 9."),  # new text of a known title: appended
        ("Ed-Wood", "A different article whose slug is taken."),
        ("Lothair II", "Lothair II was a king."),
        ("Lothair II", "Lothair II was a king."),
    ]
    pooled = {d.id: d for d in datasets.pool_passages(docs, passages)}
    assert pooled["teutberga"].text == "Teutberga was a queen."
    assert pooled["ed-wood"].text == "Ed Wood was a director.\n\nHe directed Plan 9."
    assert pooled["lothair-ii"].text == "Lothair II was a king."
    (clash,) = [d for d in pooled.values() if d.title == "Ed-Wood"]
    assert clash.id.startswith("ed-wood-") and len(pooled) == 4


def test_docs_option_keeps_the_asked_gold_documents_plus_n_others(tiny):
    docs, tasks, _, _ = tiny
    corpus = quality.Corpus("2Wiki", docs, {"2Wiki": tasks})
    cut = quality.subset(corpus, tasks[:2], 3)
    gold = {d for t in tasks[:2] for d in t.gold_doc_ids}
    assert gold <= {d.id for d in cut.docs} and len(cut.docs) == len(gold) + 3
    assert quality.parse_args(["--datasets", "pooled,enron,patents", "--docs", "5"]).docs == 5


def test_rows_sit_next_to_hippo_rag_2():
    report = sys.modules["_report"]
    assert [report.anchor_r5(d) for d in ("pooled/MuSiQue", "2Wiki", "enron")] == [
        "74.7",
        "90.4",
        "–",
    ]
