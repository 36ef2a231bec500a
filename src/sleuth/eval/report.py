"""Eval reports: Markdown tables, PNG plots and one self-contained HTML page.

The HTML page has its CSS inline and its plots embedded as base64 data URIs, and links to
nothing, so it opens offline and can be mailed as a single file.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from sleuth.eval.plots import metrics_by_group, tokens_over_turns, tool_calls_per_turn
from sleuth.eval.records import EvalSummary, QueryRecord, Scores
from sleuth.harness.trajectory import Trajectory, Turn, load_trajectory
from sleuth.io import atomic_write_text

COLUMNS = {
    "count": "n",
    "failed_count": "failed",
    "policy_errors": "policy errors",
    "final_answer_found": "found",
    "recall": "recall",
    "recall_at_2": "R@2",
    "recall_at_5": "R@5",
    "recall_at_10": "R@10",
    "all_gold_at_5": "all gold@5",
    "precision": "precision",
    "f1": "F1",
    "f_beta": "F_β",
    "trajectory_recall": "traj. recall",
    "prune_accuracy": "prune acc.",
    "turns": "turns",
    "tool_calls_per_turn": "calls/turn",
    "peak_tokens": "peak tokens",
    "reward/total": "reward",
}
GROUP_TITLES = {"by_hops": "hop level", "by_domain": "domain", "by_source": "source"}
_COUNTS = {"count", "failed_count", "policy_errors", "peak_tokens", "total_tokens"}
_SNIPPET = 320  # characters of a chunk shown in the example trajectory
_TEXT = 2000  # characters of a policy message shown


def write_report(out_dir: Path, summary: EvalSummary, records: Sequence[QueryRecord]) -> list[Path]:
    """Write ``summary.md``, the PNG plots and ``report.html``; returns the paths written."""
    images = draw_plots(summary, records)
    written = []
    for name, png in images.items():
        (out_dir / name).write_bytes(png)
        written.append(out_dir / name)
    atomic_write_text(out_dir / "summary.md", markdown_summary(summary))
    atomic_write_text(out_dir / "report.html", html_report(summary, records, images, out_dir))
    return [*written, out_dir / "summary.md", out_dir / "report.html"]


def draw_plots(summary: EvalSummary, records: Sequence[QueryRecord]) -> dict[str, bytes]:
    """File name → PNG bytes of every plot."""
    calls = [n for r in records for run in r.turn_tool_calls for n in run]
    tokens = [run for r in records for run in r.turn_tokens]
    return {
        "metrics_by_hops.png": metrics_by_group(summary.by_hops, "hop level"),
        "metrics_by_domain.png": metrics_by_group(summary.by_domain, "domain"),
        "tool_calls_per_turn.png": tool_calls_per_turn(calls),
        "tokens_over_turns.png": tokens_over_turns(tokens),
    }


def format_value(key: str, value: Any) -> str:
    if value is None:
        return "–"
    if key in _COUNTS or key.endswith("_n"):
        return f"{value:,.0f}"
    return f"{value:.2f}" if key in ("turns", "tool_calls") else f"{value:.3f}"


def table_rows(summary: EvalSummary) -> list[tuple[str, list[tuple[str, Scores]]]]:
    """``(table title, [(row label, aggregate), ...])`` for overall and every grouping."""
    tables = [("Overall", [("all", summary.overall)])]
    for key, title in GROUP_TITLES.items():
        tables.append((f"By {title}", list(summary.group(key).items())))
    return tables


def markdown_summary(summary: EvalSummary) -> str:
    """The summary as Markdown tables (overall, by hop level, by domain, by source)."""
    lines = [f"# Eval: {summary.policy}", "", _settings_line(summary)]
    overall = summary.overall
    if overall.get("failed_count"):
        lines += [
            "",
            f"**{overall['failed_count']} of {overall['count']} queries failed** (every rollout "
            f"ended without a usable run; {overall['policy_errors']} run(s) on a policy error): "
            "their metrics count as 0.",
        ]
    for title, rows in table_rows(summary):
        lines += ["", f"## {title}", "", "| group | " + " | ".join(COLUMNS.values()) + " |"]
        lines.append("|---" * (len(COLUMNS) + 1) + "|")
        for label, agg in rows:
            cells = [format_value(k, agg.get(k)) for k in COLUMNS]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _settings_line(summary: EvalSummary) -> str:
    fuse = f", fused by {summary.fuse} (k = {summary.rrf_k})" if summary.fuse else ""
    runs = f"{summary.rollouts} rollout(s) per query{fuse}"
    return f"Policy `{summary.policy}`, {runs}, β = {summary.beta}."


# ---- HTML ---------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1150px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.plots img{max-width:49%;border:1px solid #eee;margin:2px}
.turn{border-left:3px solid #88a;margin:.8em 0;padding:.2em .8em;background:#fafafe}
.call{font-family:ui-monospace,monospace;color:#225}.chunk{margin:.2em 0 .2em 1em;font-size:12.5px}
.gold{background:#e5f6e0}.pruned{text-decoration:line-through;color:#999}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em;font-size:12.5px}
.muted{color:#777}
"""


def html_report(
    summary: EvalSummary, records: Sequence[QueryRecord], images: dict[str, bytes], out_dir: Path
) -> str:
    """One offline page: settings, tables, plots, per-query results and an example run."""
    parts = [f"<h1>Eval: {escape(summary.policy)}</h1>"]
    parts.append(f"<p>{escape(_settings_line(summary))}</p>")
    for title, rows in table_rows(summary):
        parts.append(f"<h2>{escape(title)}</h2>{_html_table(rows)}")
    parts.append("<h2>Plots</h2><div class='plots'>")
    for name, png in images.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<img alt='{escape(name)}' src='data:image/png;base64,{data}'>")
    parts.append("</div><h2>Queries</h2>" + _query_table(records))
    example = _example(records, out_dir)
    if example is not None:
        record, trajectory = example
        parts.append("<h2>Example trajectory</h2>" + render_trajectory(trajectory, record))
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>sleuth eval: {escape(summary.policy)}</title><style>{_CSS}</style>"
        f"</head><body>{body}</body></html>\n"
    )


def _html_table(rows: list[tuple[str, Scores]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in ["group", *COLUMNS.values()])
    body = "".join(
        f"<tr><td>{escape(label)}</td>"
        + "".join(f"<td>{format_value(k, agg.get(k))}</td>" for k in COLUMNS)
        + "</tr>"
        for label, agg in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _query_table(records: Sequence[QueryRecord]) -> str:
    keys = ["final_answer_found", "recall", "recall_at_5", "f1", "trajectory_recall", "turns"]
    head = "".join(f"<th>{h}</th>" for h in ["task", "hops", "domain", *keys, "reward", "stop"])
    rows = []
    for r in records:
        m = r.metrics
        cells = [escape(r.task_id), str(r.hops), escape(r.domain)]
        cells += [format_value(k, getattr(m, k)) for k in keys]
        cells += [
            format_value("reward", r.reward.total),
            escape(", ".join(map(str, r.stop_reasons))),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _example(
    records: Sequence[QueryRecord], out_dir: Path
) -> tuple[QueryRecord, Trajectory] | None:
    """The first query with a multi-turn run whose trajectory file can still be read."""
    ordered = sorted(records, key=lambda r: r.metrics.turns < 2)  # stable: first wins
    for record in ordered:
        path = out_dir / record.trajectories[0]
        if path.exists():
            return record, load_trajectory(path)
    return None


def render_trajectory(trajectory: Trajectory, record: QueryRecord) -> str:
    """A run as readable HTML: each turn's text, calls and results; gold chunks highlighted."""
    gold = set(record.gold_doc_ids)
    pruned = {i for e in trajectory.tool_events() if e.prune for i in e.prune.pruned}
    parts = [
        f"<p><b>Query</b>: {escape(trajectory.query)}</p>",
        f"<p><b>Gold documents</b>: {escape(', '.join(sorted(gold)))}"
        f" <span class='muted'>(task {escape(record.task_id)}, policy "
        f"{escape(trajectory.policy)}, stop: {escape(str(trajectory.stop_reason))})</span></p>",
    ]
    parts += [_render_turn(turn, gold, pruned) for turn in trajectory.turns]
    parts.append("<h3>Final answer</h3><ol>")
    for doc in trajectory.answer.documents if trajectory.answer else []:
        css = "gold" if doc.doc_id in gold else ""
        name, why = escape(doc.doc_id), escape(doc.justification)
        parts.append(f"<li class='{css}'><b>{name}</b>: {why}</li>")
    parts.append("</ol>")
    return "\n".join(parts)


def _render_turn(turn: Turn, gold: set[str], pruned: set[str]) -> str:
    parts = [
        f"<div class='turn'><b>Turn {turn.index + 1}</b> "
        f"<span class='muted'>({turn.prompt_tokens:,} tokens sent)</span>"
    ]
    if turn.output is not None and turn.output.text.strip():
        parts.append(f"<pre>{escape(turn.output.text[:_TEXT])}</pre>")
    if turn.error:
        parts.append(f"<p>Error: {escape(turn.error)}</p>")
    for event in turn.tool_events:
        parts.append(
            f"<div class='call'>{escape(event.name)}({escape(event.raw_arguments)}) "
            f"<span class='muted'>{escape(event.status.value)}</span></div>"
        )
        shown = set(event.shown_ids)
        for chunk in (c for c in (event.result.chunks if event.result else []) if c.id in shown):
            marks = [("gold", chunk.doc_id in gold), ("pruned", chunk.id in pruned)]
            css = " ".join(name for name, on in marks if on)
            parts.append(
                f"<div class='chunk {css}'><b>{escape(chunk.id)}</b> ({chunk.tokens} tokens): "
                f"{escape(chunk.text[:_SNIPPET])}</div>"
            )
    return "\n".join(parts) + "</div>"
