"""``sleuth adapt``: tasks generated over the index's own corpus train the selector, which is
stored in the index and used by every later search of it without a flag; ``--ranker`` overrides.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import sleuth
from sleuth.cli import app
from sleuth.io import read_jsonl
from sleuth.ranking.adapted import ADAPTED_RANKER, resolve_ranker
from sleuth.ranking.model import load_ranker
from sleuth.tasks import load_tasks
from sleuth.tasks.split import is_heldout
from sleuth.train.adapt import ranker_fingerprint
from tests.test_datagen_offline_facts import templated

QUERY = "Who moved to Austin to join Acme Corp?"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """An index of 60 short templated one-sentence records (no titles), hash embedder."""
    root = tmp_path_factory.mktemp("adapt")
    sleuth.Index.create(root / "ix", embedder="hash:64").ingest(templated(60, seed=3))
    return root / "ix"


def _copy(index: Path, tmp_path: Path) -> Path:
    target = tmp_path / "ix"
    shutil.copytree(index, target)
    return target


def test_adapt_end_to_end_from_the_command_line(corpus, tmp_path):
    index = _copy(corpus, tmp_path)
    argv = ["adapt", "--index", str(index), "--tasks", "16", "--force", "--json"]
    result = CliRunner().invoke(app, [*argv, "--out-tasks", str(tmp_path / "t.jsonl")])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["generated"] == 16 and report["installed"]
    assert report["train_tasks"] + report["heldout_tasks"] == 16
    assert set(report["heldout"]) == {"single-pass", "shipped", "adapted"}
    for score in report["heldout"].values():
        assert 0 <= score["mean"]["recall_at_5"] <= 1
    written = load_tasks(tmp_path / "t.jsonl")
    assert len(written) == 16
    assert all(
        t.model_extra["split"] == ("heldout" if is_heldout(t.id) else "train") for t in written
    )
    model = load_ranker(index / ADAPTED_RANKER)  # a ranker file this version loads
    # linear by default, though the shipped head is trees (trees adapted worse, RESULTS.md)
    assert load_ranker(None).selection.kind == "trees"
    assert report["learner"] == "linear" and model.selection.kind == "linear"
    heldout = {t.id for t in written if is_heldout(t.id)}
    assert model.question_ids and not heldout & set(model.question_ids)  # no leakage
    assert set(model.question_ids) == {t.id for t in written} - heldout
    assert model.trained_on["adapted"]["heldout_tasks"] == len(heldout)
    # resumable: a second run reuses the tasks, the trained candidate and the held-out runs
    work = sorted((index / "adapt").iterdir())
    stamps = {p.name: p.stat().st_mtime_ns for p in work if p.name != "report.json"}
    again = CliRunner().invoke(app, argv)
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["heldout"] == report["heldout"]
    assert {p.name: p.stat().st_mtime_ns for p in work if p.name != "report.json"} == stamps


def test_a_second_learner_shares_the_tasks_and_the_baseline_runs(corpus, tmp_path):
    index = _copy(corpus, tmp_path)
    argv = ["adapt", "--index", str(index), "--tasks", "16", "--force", "--json", "--learner"]
    reports = {}
    for learner in ("linear", "gbdt"):
        result = CliRunner().invoke(app, [*argv, learner])
        assert result.exit_code == 0, result.stderr
        reports[learner] = json.loads(result.stdout)
        kind = load_ranker(index / ADAPTED_RANKER).selection.kind
        assert reports[learner]["learner"] == learner and kind == {"gbdt": "trees"}.get(
            learner, learner
        )
    linear, gbdt = reports["linear"], reports["gbdt"]
    assert linear["tasks_file"] == gbdt["tasks_file"]  # the same generated tasks
    for row in ("single-pass", "shipped"):  # ... and the same baseline runs, made once
        assert linear["heldout"][row] == gbdt["heldout"][row]
    rows = Counter(r["policy"] for r in read_jsonl(index / "adapt" / "heldout-g1-n16-s0.jsonl"))
    shipped = next(p for p in rows if p.startswith("shipped-"))  # keyed by the shipped ranker
    n = gbdt["heldout_tasks"]
    assert rows == {"single-pass": n, shipped: n, "adapted-linear": n, "adapted-gbdt": n}
    candidates = sorted(p.name for p in (index / "adapt").glob("ranker-*.json"))
    assert candidates == ["ranker-g1-n16-s0-gbdt.json", "ranker-g1-n16-s0-linear.json"]


def test_shipped_runs_of_another_shipped_ranker_are_run_again(corpus, tmp_path):
    """After an upgrade the adapted ranker is compared with the shipped ranker of this version,
    never with runs kept from an earlier one."""
    index = _copy(corpus, tmp_path)
    argv = ["adapt", "--index", str(index), "--tasks", "16", "--force", "--json"]
    first = json.loads(CliRunner().invoke(app, argv).stdout)
    path = index / "adapt" / "heldout-g1-n16-s0.jsonl"
    rows = list(read_jsonl(path))
    current = f"shipped-{ranker_fingerprint(load_ranker(None))}"  # kept under this version's ranker
    assert sum(r["policy"] == current for r in rows) == first["heldout_tasks"]
    for r in rows:  # as an older shipped ranker would have left them: other rows, all misses
        if r["policy"].startswith("shipped-"):
            r["policy"] = "shipped-0123456789ab"
            r["metrics"] = dict.fromkeys(r["metrics"], 0.0)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = json.loads(CliRunner().invoke(app, argv).stdout)
    assert again["heldout"] == first["heldout"]


def _planted(index: Path) -> list[str]:
    """Store a ranker in the index that reverses the shipped one's judgement; returns the
    heuristic agent's final list with it."""
    shipped = load_ranker(None)
    flipped = {}
    for name in ("search", "selection"):
        head = getattr(shipped, name)
        if head.kind == "trees":  # negate the calibrated log-odds
            flipped[name] = head.model_copy(update={"platt": (-head.platt[0], -head.platt[1])})
        else:
            flipped[name] = head.model_copy(update={"weights": list(-np.asarray(head.weights))})
    shipped.model_copy(update=flipped).save(index / ADAPTED_RANKER)
    return _run(index, "--ranker", str(index / ADAPTED_RANKER))


def _run(index: Path, *extra: str) -> list[str]:
    argv = ["run", QUERY, "--index", str(index), "--json", *extra]
    result = CliRunner().invoke(app, [*argv, "--trajectory", str(index.parent / "t.jsonl")])
    assert result.exit_code == 0, result.stderr
    return [d["id"] for d in json.loads(result.stdout)["documents"]]


def test_an_adapted_index_is_searched_with_its_ranker_without_flags(corpus, tmp_path):
    index = _copy(corpus, tmp_path)
    shipped = _run(index)  # no ranker in the index yet: the shipped one
    planted = _planted(index)
    assert planted != shipped  # the planted ranker orders this query's documents differently
    assert _run(index) == planted  # `sleuth run` with no flag uses the index's ranker
    assert _run(index, "--ranker", "shipped") == shipped  # ... unless told otherwise
    api = sleuth.search(QUERY, index=index)  # so does the Python API
    assert [d.id for d in api.documents] == planted
    forced = sleuth.PolicyOptions(ranker="shipped")
    assert [d.id for d in sleuth.search(QUERY, index=index, options=forced).documents] == shipped


def test_resolve_ranker_order_of_precedence(corpus, tmp_path):
    index = _copy(corpus, tmp_path)
    shipped = load_ranker(None)
    assert resolve_ranker(None, index) == shipped  # nothing adapted yet
    planted = shipped.model_copy(update={"question_ids": ["planted"]})
    planted.save(index / ADAPTED_RANKER)
    assert resolve_ranker(None, index).question_ids == ["planted"]
    assert resolve_ranker("shipped", index) == shipped
    other = tmp_path / "other.json"
    shipped.model_copy(update={"question_ids": ["other"]}).save(other)
    assert resolve_ranker(other, index).question_ids == ["other"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tasks", "3"], "--tasks"),
        (["--tasks", "-1"], "--tasks"),
        (["--out-tasks", "."], "--out-tasks"),
        (["--learner", "forest"], "--learner"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(corpus, tmp_path, extra, message):
    index = _copy(corpus, tmp_path)
    before = sorted(p.name for p in index.iterdir())
    result = CliRunner().invoke(app, ["adapt", "--index", str(index), *extra])
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.stderr
    assert sorted(p.name for p in index.iterdir()) == before


def test_a_corpus_without_tasks_is_refused_in_one_line(tmp_path):
    index = tmp_path / "ix"
    docs = [sleuth.Document(id=f"d{i}", text="the river runs to the sea.") for i in range(3)]
    sleuth.Index.create(index, embedder="hash:64").ingest(docs)
    result = CliRunner().invoke(app, ["adapt", "--index", str(index), "--tasks", "8"])
    assert result.exit_code == 2 and "at least 4 generated tasks" in result.stderr
    assert not (index / ADAPTED_RANKER).exists()
