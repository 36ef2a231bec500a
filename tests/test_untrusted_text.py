"""Text from a model or a corpus is untrusted: lone surrogates never stop a write, a run or an
eval; zip member names never become paths."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.corpus.readers import read_path
from sleuth.eval.runner import EvalConfig, run_eval
from sleuth.harness.trajectory import StopReason, load_trajectory
from sleuth.index import Index
from sleuth.io import append_jsonl, atomic_write_text, json_text, read_jsonl, safe_text
from sleuth.policies import OpenAIChatPolicy
from sleuth.tasks.schema import Task
from sleuth.tools.toolbox import Toolbox
from tests.openai_stub import StubServer, assistant

ANY_TEXT = st.text(st.characters(categories=["Cs", "L", "N", "P", "Zs", "So", "Cc"]))
SURROGATE_ANSWER = (
    '<Document id="nile"><Justification>Flows through Egypt \ud800.</Justification></Document>'
)
DOCS = [
    Document(id="nile", text="The Nile is a river in Africa. It flows north through Egypt."),
    Document(id="alps", text="The Alps are a mountain range in Europe with glaciers."),
]


def surrogate_reply(body: dict, index: int) -> dict:
    """Lone surrogates everywhere a model can put text, sent as JSON escapes as servers do."""
    return {
        "message": assistant(content=SURROGATE_ANSWER) | {"reasoning_content": "hm \udc80"},
    }


@given(ANY_TEXT)
def test_safe_text_always_encodes_and_keeps_valid_text(text):
    safe = safe_text(text)
    safe.encode("utf-8")  # never raises
    assert safe_text(safe) == safe
    if all(not "\ud800" <= c <= "\udfff" for c in text):
        assert safe == text
    else:
        assert "\ufffd" in safe or len(safe) < len(text)  # replaced, or a split pair joined


def test_a_split_surrogate_pair_is_joined_and_a_lone_one_replaced():
    assert safe_text("a\ud83d\ude00b") == "a\U0001f600b"
    assert safe_text("a\ud800b\udfff") == "a\ufffdb\ufffd"


@given(st.dictionaries(ANY_TEXT, ANY_TEXT | st.lists(ANY_TEXT, max_size=3), max_size=4))
def test_written_records_read_back_as_their_safe_text(tmp_path_factory, record):
    path = tmp_path_factory.mktemp("io") / "records.jsonl"
    append_jsonl(path, record)
    append_jsonl(path, {"n": 2})
    first, second = read_jsonl(path)
    assert first == json.loads(json_text(record)) and second == {"n": 2}
    atomic_write_text(path, str(record))
    assert path.read_bytes().decode("utf-8") == safe_text(str(record))


def index_dir(root: Path) -> Path:
    path = root / "index"
    Index.create(path, embedder="hash").ingest(DOCS)
    return path


def test_sleuth_run_with_lone_surrogates_in_the_reply_exits_0(tmp_path):
    """Before: the trajectory write failed and `sleuth run` called it a user error (exit 2)."""
    trajectory = tmp_path / "run.jsonl"
    with StubServer([surrogate_reply]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "sleuth.cli", "run", "Which river?"]
            + ["--index", str(index_dir(tmp_path)), "--model", "m", "--base-url", server.base_url]
            + ["--trajectory", str(trajectory), "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "answered" and result["documents"][0]["id"] == "nile"
    assert result["documents"][0]["justification"] == "Flows through Egypt \ufffd."
    loaded = load_trajectory(trajectory)
    assert loaded.stop_reason is StopReason.ANSWERED
    assert loaded.turns[0].output.reasoning == "hm \ufffd"


def test_eval_with_lone_surrogates_finishes_every_query_and_the_summary(tmp_path):
    """Before: the eval stopped after one record and wrote no summary."""
    tasks = [
        Task(id=f"t{i}", query=f"Which river, {i}?", answer="Nile", gold_doc_ids=["nile"])
        for i in range(10)
    ]
    tools = Toolbox(Index.open(index_dir(tmp_path)))
    with StubServer(surrogate_reply) as server:

        def policy(seed: int) -> OpenAIChatPolicy:
            return OpenAIChatPolicy("m", base_url=server.base_url, max_retries=0)

        summary = run_eval(
            tasks, policy, tools, tmp_path / "out", EvalConfig(concurrency=2, progress=False)
        )
    records = list(read_jsonl(tmp_path / "out" / "results.jsonl"))
    assert sorted(r["task_id"] for r in records) == sorted(t.id for t in tasks)
    assert summary.overall["count"] == 10 and summary.overall["recall"] == 1.0
    assert (tmp_path / "out" / "summary.md").is_file()


def test_zip_slip_names_are_only_ids_and_html_scripts_are_dropped(tmp_path, monkeypatch):
    """Members named to escape the folder are read in memory, never written anywhere; they
    stay document ids, and an HTML member's script never reaches the index."""
    archive = tmp_path / "in" / "slip.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../evil.txt", "escaped text")
        zf.writestr("/abs/root.txt", "absolute text")
        zf.writestr("a/../../up.html", "<p>up here</p><script>steal()</script>")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    index = Index.create(work / "index", embedder="hash")
    index.ingest(list(read_path(archive)))
    tools = Toolbox(Index.open(work / "index"))
    assert tools.read_document("../../evil.txt").chunks[0].text == "escaped text"
    assert tools.read_document("/abs/root.txt").chunks[0].text == "absolute text"
    assert tools.read_document("a/../../up.html").chunks[0].text == "up here"
    assert not tools.grep_corpus("steal").chunks
    outside = [p for p in tmp_path.rglob("*") if work / "index" not in p.parents]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in outside) == [
        "in",
        "in/slip.zip",
        "work",
        "work/index",
    ]
