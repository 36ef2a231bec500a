"""The default agent's parallel tool calls: the same trajectory and final list as running them
in call order, on a small real index (real MiniLM int8, Chroma, bm25s, the shipped selector),
and a call that fails among parallel ones costs only its own result."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import sleuth
from sleuth.harness.loop import HarnessConfig
from sleuth.harness.trajectory import CallStatus, load_trajectory
from sleuth.tasks import read_2wiki
from tests.conftest import PACKAGED_2WIKI, wiki_documents


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> sleuth.Index:
    built = sleuth.Index.create(tmp_path_factory.mktemp("par") / "ix")  # the default embedder
    built.ingest(wiki_documents(8))
    return sleuth.Index.open(built.path)


def _questions(n: int) -> list[str]:
    _, tasks = read_2wiki(str(resources.files("sleuth").joinpath(PACKAGED_2WIKI)))
    return [t.query for t in tasks[:n]]


def _calls(path: str) -> list[list[tuple[Any, ...]]]:
    """Every turn's calls: name, arguments, status, what was shown and dropped."""
    return [
        [(e.name, e.arguments, e.status, e.shown_ids, e.dropped_ids) for e in t.tool_events]
        for t in load_trajectory(path).turns
    ]


def test_parallel_calls_give_the_sequential_trajectory(index: sleuth.Index, tmp_path: Path):
    runs = {
        parallel: sleuth.Agent(index, harness=HarnessConfig(parallel_tools=parallel))
        for parallel in (True, False)
    }
    widths = []
    for i, question in enumerate(_questions(6)):
        got = {
            p: agent.search(question, trajectory=tmp_path / f"{p}-{i}.jsonl")
            for p, agent in runs.items()
        }
        assert [d.id for d in got[True].documents] == [d.id for d in got[False].documents]
        assert got[True].documents, question
        parallel, sequential = (_calls(got[p].trajectory) for p in (True, False))
        assert parallel == sequential
        widths.append(max(len(turn) for turn in parallel))
    assert min(widths) >= 2 and max(widths) >= 3, widths  # parallel searches were made


def test_a_failing_call_among_parallel_ones_loses_only_its_own(
    index: sleuth.Index, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    agent = sleuth.Agent(index)
    for n, question in enumerate(_questions(6)):  # one whose first turn searches 3+ times
        clean = agent.search(question, trajectory=tmp_path / f"clean-{n}.jsonl")
        first = load_trajectory(clean.trajectory).turns[0].tool_events
        if len(first) >= 3:
            break
    broken = first[1].arguments["query"]
    search = type(agent.tools).search_corpus

    def failing(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        if query == broken:
            raise RuntimeError("store down")
        return search(self, query, *args, **kwargs)

    monkeypatch.setattr(type(agent.tools), "search_corpus", failing)
    hurt = load_trajectory(agent.search(question, trajectory=tmp_path / "hurt.jsonl").trajectory)
    events = hurt.turns[0].tool_events
    assert events[1].status == CallStatus.TOOL_ERROR and "store down" in events[1].observation
    assert len(events) == len(first) >= 3
    for i, event in enumerate(events):  # every other call delivered its result
        assert i == 1 or (event.status == CallStatus.OK and event.result.chunks)
    assert events[0].shown_ids == first[0].shown_ids
