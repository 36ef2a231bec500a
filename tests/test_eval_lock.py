"""One eval writes an --out folder at a time, and bad settings never reach its run.json."""

from __future__ import annotations

import json

import pytest

from sleuth.errors import BusyError, InputError
from sleuth.eval import EvalConfig, run_eval
from sleuth.io import folder_lock
from tests.test_eval import KeywordTools, make_tasks


def test_second_eval_into_one_out_is_refused(tmp_path):
    tasks = make_tasks()[:2]
    with folder_lock(tmp_path, "an eval run"), pytest.raises(BusyError, match="another sleuth"):
        run_eval(tasks, "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False))
    assert not (tmp_path / "run.json").exists() and not (tmp_path / "results.jsonl").exists()
    run_eval(tasks, "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False))
    ids = [json.loads(line)["task_id"] for line in (tmp_path / "results.jsonl").open()]
    assert sorted(ids) == sorted(t.id for t in tasks)


@pytest.mark.parametrize("beta", [float("nan"), float("inf"), 0.0, -1.0])
def test_bad_beta_leaves_the_out_folder_resumable(tmp_path, beta):
    tasks = make_tasks()[:1]
    with pytest.raises(InputError, match="beta"):
        run_eval(
            tasks, "single-pass", KeywordTools(), tmp_path, EvalConfig(beta=beta, progress=False)
        )
    assert list(tmp_path.iterdir()) == []
    for _ in range(2):  # the corrected run, then its resume
        summary = run_eval(
            tasks, "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False)
        )
    assert summary.overall["count"] == 1 and summary.beta == 4.0


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("keep")
    with pytest.raises(InputError, match="is a file"):
        run_eval(
            make_tasks()[:1],
            "single-pass",
            KeywordTools(),
            tmp_path / "f",
            EvalConfig(progress=False),
        )
    assert (tmp_path / "f").read_text() == "keep"
