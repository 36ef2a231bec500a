"""Ray rollout workers on a real local cluster (``ray.init()`` on this machine): the same
trajectories as in-process rollouts, in job order, written by the workers.

Ray comes with the test extras (``pip install -e ".[train,dev]"``); without it the test is
skipped and says why.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest

from sleuth.corpus.models import Document
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.trajectory import StopReason, load_trajectory
from sleuth.index import Index
from sleuth.policies import make_policy
from sleuth.tasks.schema import Task
from sleuth.tools.toolbox import Toolbox
from sleuth.train.rollout import RolloutJob, collect_rollouts, collect_rollouts_ray

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[dev]")')

DOCS = [
    Document(id="nile", text="The Nile is a river in Africa. It flows north through Egypt."),
    Document(id="cairo", text="Cairo, the capital of Egypt, lies on the banks of the Nile."),
    Document(id="alps", text="The Alps are a mountain range in Europe with glaciers."),
    Document(id="amazon", text="The Amazon river in South America carries the most water."),
]
QUERIES = ["Which river flows through Egypt?", "Where are glaciers in Europe?"] * 3


def heuristic(seed: int):
    return make_policy("heuristic")


def open_tools(index_dir: Path) -> Toolbox:
    return Toolbox(Index.open(index_dir))


def comparable(trajectory) -> dict:
    """What must not depend on where a rollout ran."""
    return {
        "query": trajectory.query,
        "stop": trajectory.stop_reason,
        "answer": trajectory.answer.doc_ids if trajectory.answer else None,
        "calls": [(e.name, e.raw_arguments, e.shown_ids) for e in trajectory.tool_events()],
    }


def test_rollouts_on_a_local_ray_cluster_match_in_process_ones(tmp_path: Path):
    index_dir = tmp_path / "index"
    Index.create(index_dir, embedder="hash").ingest(DOCS)
    tasks = [Task(id=f"t{i}", query=q, answer="-") for i, q in enumerate(QUERIES)]
    jobs = [
        RolloutJob(t, seed=i, trajectory_path=tmp_path / f"{t.id}.jsonl")
        for i, t in enumerate(tasks)
    ]
    config = HarnessConfig(parallel_tools=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = collect_rollouts_ray(
            lambda: heuristic,
            functools.partial(open_tools, index_dir),
            config,
            jobs,
            num_workers=2,
        )
    finally:
        ray.shutdown()
    written = [load_trajectory(j.trajectory_path) for j in jobs]  # by the workers
    local_jobs = [replace(j, trajectory_path=None) for j in jobs]
    local = collect_rollouts(heuristic, open_tools(index_dir), config, local_jobs)
    assert [t.query for t in remote] == QUERIES
    assert all(t.stop_reason is StopReason.ANSWERED for t in remote)
    assert [comparable(t) for t in remote] == [comparable(t) for t in local]
    assert [t.run_id for t in written] == [t.run_id for t in remote]
