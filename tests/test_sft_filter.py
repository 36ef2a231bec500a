"""The SFT filter's rules (SPEC §6), one by one, on hand-built candidates."""

from __future__ import annotations

import pytest

from sleuth.harness.answer import AnswerDocument, ParsedAnswer
from sleuth.harness.policy import PolicyOutput
from sleuth.harness.trajectory import CallStatus, StopReason, ToolEvent, Trajectory, Turn
from sleuth.tasks.schema import Task
from sleuth.tools.types import ChunkHit, ToolResult
from sleuth.train.sft_filter import (
    Candidate,
    SFTFilterConfig,
    Verdict,
    candidate_from_run,
    filter_for_sft,
    low_keep_probability,
)


def cand(query: str, traj: float, out: float, malformed: bool = False, tag: str = "") -> Candidate:
    return Candidate(query, traj, out, malformed, tag or f"{query}:{traj}:{out}")


@pytest.mark.parametrize(
    ("candidate", "verdict"),
    [
        # both recalls above the report's thresholds: kept in full
        (cand("q", 0.6, 0.5), Verdict.KEPT_HIGH),
        (cand("q", 1.0, 1.0), Verdict.KEPT_HIGH),
        # a malformed answer loses even with perfect recall
        (cand("q", 1.0, 1.0, malformed=True), Verdict.DROPPED_MALFORMED),
        # saw every gold document, listed none: explored well, concluded poorly
        (cand("q", 1.0, 0.0), Verdict.DROPPED_EXPLORED_NOT_CONCLUDED),
        # the gap is exactly the threshold (0.5): dropped
        (cand("q", 0.5, 0.0), Verdict.DROPPED_EXPLORED_NOT_CONCLUDED),
        # on the high-recall boundary the low-recall keep rate is 1
        (cand("q", 0.5, 0.4), Verdict.KEPT_LOW),
    ],
)
def test_single_candidate_rules(candidate: Candidate, verdict: Verdict) -> None:
    assert filter_for_sft([candidate]).verdicts == [verdict]


def test_one_high_recall_rollout_per_query_the_best_one() -> None:
    candidates = [
        cand("a", 0.6, 0.5),
        cand("a", 1.0, 1.0),
        cand("a", 1.0, 0.5),
        cand("b", 0.6, 0.5),
    ]
    result = filter_for_sft(candidates)
    assert result.verdicts == [
        Verdict.DROPPED_DUPLICATE_HIGH,
        Verdict.KEPT_HIGH,  # best output recall of query a
        Verdict.DROPPED_DUPLICATE_HIGH,
        Verdict.KEPT_HIGH,
    ]
    assert result.kept == ["a:1.0:1.0", "b:0.6:0.5"]
    assert result.report.counts["dropped_duplicate_high"] == 2
    assert (result.report.queries, result.report.queries_kept) == (2, 2)


def test_zero_recall_negatives_one_per_query_at_most_five_percent() -> None:
    positives = [cand(f"p{i}", 1.0, 1.0) for i in range(38)]
    zeros = [cand(f"z{i}", 0.0, 0.0) for i in range(4)] + [cand("z0", 0.2, 0.0, tag="z0-again")]
    result = filter_for_sft(positives + zeros)
    kept_zero = [
        k for k, v in zip(positives + zeros, result.verdicts, strict=True) if v == "kept_zero"
    ]
    # 2 / (38 + 2) = 5% exactly; a third would exceed it
    assert len(kept_zero) == 2
    assert len({c.query_id for c in kept_zero}) == 2
    assert result.report.counts["dropped_zero_excess"] == 3
    assert result.verdicts[-1] == Verdict.DROPPED_ZERO_EXCESS  # the second zero of query z0


def test_zero_recall_needs_enough_positives() -> None:
    result = filter_for_sft([cand("a", 1.0, 1.0), cand("b", 0.0, 0.0)])
    assert result.verdicts == [Verdict.KEPT_HIGH, Verdict.DROPPED_ZERO_EXCESS]


def test_low_recall_keep_rate_diminishes_and_is_seeded() -> None:
    config = SFTFilterConfig()
    assert low_keep_probability(0.5, 0.4, config) == 1.0
    assert low_keep_probability(0.25, 0.2, config) == pytest.approx(0.25)  # halfway: 0.5 ** 2
    assert low_keep_probability(0.1, 0.05, config) < low_keep_probability(0.3, 0.2, config)
    low = [cand(f"q{i}", 0.25, 0.2) for i in range(400)]
    first = filter_for_sft(low, config)
    assert first.verdicts == filter_for_sft(low, config).verdicts  # same seed, same draws
    share = first.report.counts["kept_low"] / len(low)
    assert 0.19 < share < 0.31
    other = filter_for_sft(low, SFTFilterConfig(seed=1))
    assert other.verdicts != first.verdicts


def test_report_lists_every_rule() -> None:
    report = filter_for_sft([]).report
    assert set(report.counts) == {v.value for v in Verdict}
    assert (report.total, report.kept) == (0, 0)


def _run(final: list[str], seen: list[str], malformed: bool = False) -> Trajectory:
    chunks = [ChunkHit(id=f"{d}_0", doc_id=d, text="x", tokens=1) for d in seen]
    event = ToolEvent(
        call_id="c",
        name="search_corpus",
        raw_arguments="{}",
        status=CallStatus.OK,
        result=ToolResult(tool="search_corpus", chunks=chunks),
        shown_ids=[c.id for c in chunks],
    )
    docs = [AnswerDocument(id=d, doc_id=d, rank=i + 1) for i, d in enumerate(final)]
    return Trajectory(
        run_id="r",
        started_at="2026-01-01T00:00:00+00:00",
        query="q",
        policy="p",
        system_prompt="s",
        user_message="u",
        tool_schemas=[],
        settings={},
        turns=[
            Turn(
                index=0,
                messages=[],
                prompt_tokens=1,
                max_tokens=1,
                output=PolicyOutput(),
                tool_events=[event],
            ),
            Turn(index=1, messages=[], prompt_tokens=1, max_tokens=1, output=PolicyOutput()),
        ],
        answer=ParsedAnswer(documents=docs, malformed=malformed),
        stop_reason=StopReason.MALFORMED_ANSWER if malformed else StopReason.ANSWERED,
    )


def test_candidate_from_a_trajectory_uses_document_recalls() -> None:
    task = Task(id="t1", query="q", answer="a", gold_doc_ids=["g1", "g2"])
    candidate = candidate_from_run(_run(final=["g1", "x"], seen=["g1", "g2", "x"]), task)
    assert (candidate.query_id, candidate.trajectory_recall, candidate.output_recall) == (
        "t1",
        1.0,
        0.5,
    )
    assert not candidate.malformed
    assert candidate_from_run(_run(["g1"], ["g1"], malformed=True), task).malformed
