"""The Python API (``import sleuth``): what it returns equals what the tools, the CLI and the
harness return, because they are the same code; and the README's Python snippet runs."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sleuth
from sleuth.cli import app
from sleuth.corpus.models import Document
from sleuth.errors import ConfigError, InputError
from sleuth.tasks import Task, save_tasks
from sleuth.tools.toolbox import Toolbox
from tests.conftest import wiki_documents

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def wiki_index(tmp_path_factory) -> sleuth.Index:
    """About 30 real Wikipedia paragraphs (hash embedder: no model load), through the API."""
    index = sleuth.Index.create(tmp_path_factory.mktemp("api") / "ix", embedder="hash")
    index.ingest(wiki_documents(3))
    return sleuth.Index.open(index.path)


def test_import_sleuth_loads_nothing_heavy():
    code = "import sys, sleuth; print(sorted(m for m in sys.modules if m.startswith(('sleuth', 'chromadb', 'numpy', 'torch'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['sleuth']"


def test_every_api_name_is_reachable_from_the_package():
    for name in sleuth.api.__all__:
        assert getattr(sleuth, name) is getattr(sleuth.api, name), name
        assert name in dir(sleuth)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sleuth.nope  # noqa: B018
    for fn in (sleuth.search, sleuth.asearch, sleuth.evaluate, sleuth.load_documents):
        assert fn.__doc__, fn
    for method in ("ingest", "search", "grep", "read", "tools"):
        assert getattr(sleuth.Index, method).__doc__, method


def test_open_and_create_return_the_api_index(wiki_index):
    assert isinstance(wiki_index, sleuth.Index)
    assert isinstance(sleuth.Index.create(wiki_index.path, embedder="hash"), sleuth.Index)


def test_ingest_takes_records_documents_and_paths(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.txt").write_text("A note about Lisbon trams.")
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(json.dumps({"id": "oslo", "text": "Oslo is in Norway."}) + "\n")
    index = sleuth.Index.create(tmp_path / "ix", embedder="hash")
    result = index.ingest(
        [
            {"id": "rome", "text": "Rome is the capital of Italy.", "title": "Rome"},
            Document(id="madrid", text="Madrid is the capital of Spain."),
            jsonl,
            str(tmp_path / "docs"),
        ]
    )
    assert result.documents == 4 and result.index_documents == 4
    assert sorted(index.documents) == sorted(["rome", "madrid", "oslo", "note.txt"])
    assert index.grep("Lisbon").chunks[0].doc_id == "note.txt"
    assert index.chunk("rome_0").title == "Rome"


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ([{"id": "a"}], "ingest(), record 0 (a): missing or non-string 'text'"),
        ([{"id": "a", "text": "  "}], "empty text"),
        (
            [{"id": "a", "text": "x"}, 3],
            "ingest(), record 1: expected a path, a dict or a Document, got int",
        ),
        ([], "no documents to ingest"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "document id given twice"),
    ],
)
def test_bad_sources_are_refused_before_anything_is_written(tmp_path, sources, message):
    index = sleuth.Index.create(tmp_path / "ix", embedder="hash")
    with pytest.raises(InputError, match=re.escape(message)):
        index.ingest(sources)
    assert index.manifest.generation == 0 and index.collection.count() == 0


def test_the_tool_methods_are_the_tools(wiki_index):
    toolbox = Toolbox(wiki_index)
    query = "Which film came out first?"
    assert wiki_index.search(query) == toolbox.search_corpus(query)
    exclude = {h.id for h in toolbox.search_corpus(query).chunks[:3]}
    assert wiki_index.search(query, exclude=exclude) == toolbox.search_corpus(query, exclude)
    assert wiki_index.grep(r"\bfilm\b") == toolbox.grep_corpus(r"\bfilm\b")
    doc = wiki_index.documents[0]
    assert wiki_index.read(doc, query=query) == toolbox.read_document(doc, query=query)


def test_k_sets_the_number_of_chunks(wiki_index):
    query = "director born"
    default = wiki_index.search(query).chunks
    assert [h.id for h in wiki_index.search(query, k=2).chunks] == [h.id for h in default[:2]]
    many = wiki_index.search(query, k=30).chunks
    assert len(many) == 30 and len({h.id for h in many}) == 30
    assert [h.id for h in many[: len(default)]] == [h.id for h in default]
    assert len(wiki_index.grep("the", k=12).chunks) == 12 > len(wiki_index.grep("the").chunks)
    budget = wiki_index.search(query, k=30, max_tokens=300)
    assert sum(wiki_index.tools().block_tokens(h) for h in budget.chunks) <= 300
    with pytest.raises(ConfigError):
        wiki_index.search(query, k=0)


def test_search_is_sleuth_run(wiki_index, tmp_path):
    query = "Who directed the film that came out first?"
    result = sleuth.search(query, index=wiki_index, trajectory=tmp_path / "api.jsonl")
    argv = ["run", query, "--index", str(wiki_index.path), "--json"]
    cli = runner.invoke(app, [*argv, "--trajectory", str(tmp_path / "cli.jsonl")])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["documents"] == result.model_dump(mode="json")["documents"]
    assert result.documents and result.stop_reason == "answered"
    assert Path(result.trajectory).is_file()
    t = result.timings
    assert 0 < t.policy_s + t.tools_s + t.harness_s <= t.wall_s * 1.01


def test_asearch_serves_concurrent_queries_like_search(wiki_index, tmp_path):
    queries = ["Who directed the film?", "Where was the director born?", "Which came first?"]
    agent = sleuth.Agent(wiki_index, "heuristic")

    async def all_at_once():
        runs = [
            agent.asearch(q, trajectory=tmp_path / f"a{i}.jsonl") for i, q in enumerate(queries)
        ]
        return await asyncio.gather(*runs)

    together = asyncio.run(all_at_once())
    one_by_one = [
        agent.search(q, trajectory=tmp_path / f"s{i}.jsonl") for i, q in enumerate(queries)
    ]
    assert [r.documents for r in together] == [r.documents for r in one_by_one]
    single = asyncio.run(
        sleuth.asearch(queries[0], index=wiki_index.path, trajectory=tmp_path / "x.jsonl")
    )
    assert single.documents == one_by_one[0].documents


def test_agent_settings_are_checked_before_any_search(wiki_index):
    with pytest.raises(InputError, match="unknown policy"):
        sleuth.Agent(wiki_index, "no-such-policy")
    built = sleuth.api.open_tools(wiki_index)
    with pytest.raises(ConfigError, match="already built"):
        sleuth.Agent(built, lambda seed: None, options=sleuth.PolicyOptions())
    with pytest.raises(ConfigError, match="reranker needs an index"):
        sleuth.Agent(built, "single-pass", reranker="cross-encoder:x")
    with pytest.raises(InputError, match="empty"):
        sleuth.search("  ", index=wiki_index, policy="single-pass")


def test_evaluate_is_sleuth_eval(wiki_index, tmp_path):
    docs = wiki_documents(3)
    tasks = [
        Task(id=f"t{i}", query=f"What is said about {d.title}?", answer="", gold_doc_ids=[d.id])
        for i, d in enumerate(docs[:3])
    ]
    save_tasks(tmp_path / "tasks.jsonl", tasks)
    summary = sleuth.evaluate(
        tmp_path / "tasks.jsonl",
        index=wiki_index,
        out=tmp_path / "api",
        policy="single-pass",
        config=sleuth.EvalConfig(progress=False),
    )
    argv = ["eval", "--index", str(wiki_index.path), "--tasks", str(tmp_path / "tasks.jsonl")]
    cli = runner.invoke(app, [*argv, "--out", str(tmp_path / "cli"), "--policy", "single-pass"])
    assert cli.exit_code == 0, cli.output

    def ranked(folder):
        lines = (tmp_path / folder / "results.jsonl").read_text().splitlines()
        return sorted((r["task_id"], r["final_docs"]) for r in map(json.loads, lines))

    assert ranked("api") == ranked("cli") and len(ranked("api")) == 3
    assert (
        summary.overall["recall"]
        == json.loads((tmp_path / "cli" / "summary.json").read_text())["overall"]["recall"]
    )


def readme_python() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use from Python", 1)[1].split("\n## ", 1)[0]
    assert len(section.strip().splitlines()) + 1 <= 25  # the heading and the section
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def test_the_readme_python_snippet_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", readme_python()],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sorted(eval(lines[0])) == ["ada", "babbage"]  # the search's two documents
    ranked = [line.split()[1] for line in lines[1:-1]]
    assert sorted(ranked) == ["ada", "babbage"] and lines[1].startswith("1 ")
    assert Path(lines[-1].split()[0]).is_file()  # the trajectory
    assert (tmp_path / "tiny-index" / "sleuth-index.json").is_file()
