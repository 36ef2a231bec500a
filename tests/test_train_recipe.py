"""``run_recipe`` end to end on a tiny model and a slice of the shipped 2Wiki sample: every
phase runs, every trained model gets its manifest, and a rerun resumes instead of redoing."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from sleuth.policies.manifest import read_manifest
from sleuth.train.recipes import RECIPES, run_recipe
from sleuth.train.recipes.data import STAGED
from sleuth.train.runlog import read_log
from sleuth.train.tiny import build_tiny_model, sample_corpus

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SAMPLE = "data/benchmarks/2wikimultihopqa/2wikimultihopqa_dev_200.jsonl"


@pytest.mark.slow
def test_the_smoke_recipe_runs_every_phase_writes_manifests_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    lines = resources.files("sleuth").joinpath(SAMPLE).read_text("utf-8").splitlines(True)
    data = tmp_path / "data"
    for i, (_, folder, _) in enumerate(STAGED.values()):  # 2Wiki records in each folder
        (data / folder).mkdir(parents=True)
        (data / folder / "sample.jsonl").write_text("".join(lines[8 * i : 8 * i + 8]), "utf-8")
    model = build_tiny_model(tmp_path / "tiny", vocab_size=2048, corpus_texts=sample_corpus())
    config = replace(RECIPES["smoke"], embedder="hash:64", sft_per_source=4, rl_pool=4)
    out = tmp_path / "out"

    def run() -> dict:
        _, result = run_recipe(config, tmp_path / "index", out, data, model, command="smoke")
        return result

    first = run()
    assert first["rl_steps"] == {"planned": 2, "done": 2}
    assert [p["step"] for p in first["curve"]] == [0, 1, 2]
    heldout = set(read_manifest(out / "sft" / "model").held_out_task_ids)
    sft = read_manifest(out / "sft" / "model")
    rl = read_manifest(out / "rl" / "checkpoints" / "step_000002" / "model")
    assert sft.phase == "sft" and rl.phase == "rl" and sft.final_list == "selector"
    assert heldout and not heldout & set(rl.trained_task_ids)
    assert set(sft.trained_task_ids) < set(rl.trained_task_ids)
    assert (out / "learning_curve.json").exists() and (out / "learning_curve.png").exists()
    log = read_log(out / "rl" / "metrics.jsonl")

    again = run()  # resumes: nothing retrained, every evaluation reused
    assert again["sft_report"] == first["sft_report"]
    assert read_log(out / "rl" / "metrics.jsonl") == log
    for key in ("single-pass", "teacher", "sft", "rl"):
        assert again[key]["recall_at_5_by_question"] == first[key]["recall_at_5_by_question"]
