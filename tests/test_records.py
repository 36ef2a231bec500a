"""Typed records: eval files and run results are pydantic models with
``schema_version``, and files written by the version before them still load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sleuth.errors import InputError
from sleuth.eval import EvalConfig, load_results, run_eval
from sleuth.eval.fusion import BEHAVIOUR
from sleuth.eval.records import (
    RECORD_SCHEMA_VERSION,
    EvalSummary,
    QueryMetrics,
    QueryRecord,
    RunInfo,
    read_json_record,
)
from sleuth.harness import RunResult, run_query
from sleuth.metrics import Metrics
from sleuth.policies.scripted import ScriptedPolicy, call, turn
from sleuth.tools.spec import SEARCH
from tests.fakes import FakeTools
from tests.test_eval import KeywordTools, make_tasks

OLD = Path(__file__).parent / "data" / "eval_v1"  # written by sleuth before the typed records


def test_old_eval_files_load_unchanged():
    raw = [json.loads(line) for line in (OLD / "results.jsonl").read_text().splitlines()]
    loaded = load_results(OLD / "results.jsonl")
    assert list(loaded) == ["t1", "t2"]
    assert [loaded["t1"].model_dump(), loaded["t2"].model_dump()] == raw  # keys, values, order
    assert [json.dumps(r.model_dump()) for r in loaded.values()] == [json.dumps(r) for r in raw]
    for record in raw:
        assert QueryRecord.model_validate(record).schema_version == RECORD_SCHEMA_VERSION
    run = json.loads((OLD / "run.json").read_text())
    assert read_json_record(RunInfo, OLD / "run.json").model_dump() == run
    summary = json.loads((OLD / "summary.json").read_text())
    assert read_json_record(EvalSummary, OLD / "summary.json").model_dump() == summary


def test_an_old_output_folder_resumes_without_running_again(tmp_path):
    out = tmp_path / "eval"
    shutil.copytree(OLD, out)
    summary = run_eval(
        make_tasks()[:2], "single-pass", KeywordTools(), out, EvalConfig(rollouts=2, progress=False)
    )
    assert summary.overall["count"] == 2 and summary.schema_version == 1
    assert not (out / "trajectories").exists()  # both queries came from the old records


def test_new_records_are_typed_and_refuse_a_newer_version(tmp_path):
    run_eval(make_tasks()[:1], "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False))
    [line] = (tmp_path / "results.jsonl").read_text().splitlines()
    record = QueryRecord.model_validate_json(line)
    assert record.task_id == "t1" and record.schema_version == RECORD_SCHEMA_VERSION
    EvalSummary.model_validate_json((tmp_path / "summary.json").read_text())
    newer = json.loads(line) | {"schema_version": RECORD_SCHEMA_VERSION + 1}
    (tmp_path / "results.jsonl").write_text(json.dumps(newer) + "\n")
    with pytest.raises(InputError, match="newer than supported"):
        load_results(tmp_path / "results.jsonl")


def test_run_query_returns_a_typed_result(tmp_path):
    answer = '<Document id="d1_0"><Justification>A.</Justification></Document>'
    policy = ScriptedPolicy([turn(call(SEARCH.name, query="x")), answer])
    result = run_query(FakeTools(), "q", policy=policy, trajectory=tmp_path / "r.jsonl")
    assert isinstance(result, RunResult) and result.schema_version == 1
    assert result.documents[0].id == "d1" and result["documents"][0]["rank"] == 1
    assert RunResult.model_validate_json(result.model_dump_json()) == result


def test_a_query_record_widens_exactly_the_int_fields_fusion_averages():
    widened = {
        name
        for name, field in QueryMetrics.model_fields.items()
        if field.annotation != Metrics.model_fields[name].annotation
    }
    assert widened == {f for f in BEHAVIOUR if Metrics.model_fields[f].annotation is int}
    assert list(QueryMetrics.model_fields) == list(Metrics.model_fields)  # same JSON key order
    fused = json.loads((OLD / "results.jsonl").read_text().splitlines()[0])["metrics"]
    one = QueryMetrics.model_validate(fused | {"turns": 3})
    assert (one.turns, type(one.turns), QueryMetrics.model_validate(fused).turns) == (3, int, 2.0)
    assert type(QueryMetrics.model_validate(fused).turns) is float  # a mean stays a float
