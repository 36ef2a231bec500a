"""An eval against a dead endpoint says so: summary.md counts failed queries and policy errors,
so 10/10 errors never read as a score of 0."""

from __future__ import annotations

import re

from sleuth.corpus.models import Document
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.index import Index
from sleuth.policies import OpenAIChatPolicy
from sleuth.tasks.schema import Task
from sleuth.tools.toolbox import Toolbox
from tests.openai_stub import StubServer, assistant

DOCS = [Document(id="nile", text="The Nile is a river in Africa. It flows north through Egypt.")]
ANSWER = assistant(content='<Document id="nile"><Justification>x</Justification></Document>')


def row(markdown: str, label: str) -> list[str]:
    """The cells of the first table row with this label."""
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def header(markdown: str) -> list[str]:
    line = next(x for x in markdown.splitlines() if x.startswith("| group |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_summary_md_counts_failed_queries_and_policy_errors(tmp_path):
    index = tmp_path / "index"
    Index.create(index, embedder="hash").ingest(DOCS)
    tasks = [
        Task(id=f"t{i}", query=f"river {i}", answer="Nile", gold_doc_ids=["nile"], hops=1 + i % 2)
        for i in range(10)
    ]

    def reply(body: dict, index: int) -> dict | int:
        return ANSWER if body["messages"][1]["content"].endswith("river 0</query>") else 500

    with StubServer(reply) as server:

        def policy(seed: int) -> OpenAIChatPolicy:
            return OpenAIChatPolicy("m", base_url=server.base_url, max_retries=0)

        out = tmp_path / "out"
        summary = run_eval(
            tasks, policy, Toolbox(Index.open(index)), out, EvalConfig(progress=False)
        )
    overall = summary.overall
    assert (overall["count"], overall["failed_count"], overall["policy_errors"]) == (10, 9, 9)
    assert summary.by_hops["1"]["failed_count"] == 4  # t0 (answered), t2, t4, t6, t8
    markdown = (out / "summary.md").read_text()
    assert "**9 of 10 queries failed**" in markdown and "9 run(s) on a policy error" in markdown
    cells = dict(zip(header(markdown), row(markdown, "all"), strict=True))
    assert (cells["n"], cells["failed"], cells["policy errors"]) == ("10", "9", "9")
    assert cells["recall"] == "0.100"
    html = (out / "report.html").read_text()
    assert re.search(r"<th>failed</th><th>policy errors</th>", html)
