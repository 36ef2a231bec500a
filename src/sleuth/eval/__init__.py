"""Evaluation (SPEC §7): a resumable, concurrent runner, scoring and reports."""

from sleuth.eval.aggregate import aggregate_records, summarize
from sleuth.eval.fusion import fuse_rankings, fuse_summaries, score_rollouts
from sleuth.eval.report import write_report
from sleuth.eval.runner import EvalConfig, load_results, run_eval
from sleuth.eval.score import score_files, score_summary, score_trajectory

__all__ = [
    "EvalConfig",
    "aggregate_records",
    "fuse_rankings",
    "fuse_summaries",
    "load_results",
    "run_eval",
    "score_files",
    "score_rollouts",
    "score_summary",
    "score_trajectory",
    "summarize",
    "write_report",
]
