"""Eval: scoring, the resumable concurrent runner, rollout fusion, reports and the baselines.

Unit tests run scripted policies over a tiny keyword ``Tools`` (no index, no model); the
end-to-end test ingests a real HotpotQA sample with the shipped all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Collection
from pathlib import Path
from statistics import mean

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sleuth
from sleuth.errors import InputError
from sleuth.eval import (
    EvalConfig,
    fuse_rankings,
    run_eval,
    score_files,
    score_trajectory,
)
from sleuth.eval.aggregate import bootstrap_interval, paired_bootstrap_difference
from sleuth.harness import Harness
from sleuth.harness.policy import PolicyOutput
from sleuth.harness.trajectory import load_trajectory
from sleuth.io import read_jsonl
from sleuth.metrics import compute_metrics
from sleuth.policies import build_policy, make_policy
from sleuth.policies.baselines import RetrieverToolbox
from sleuth.policies.heuristic import capitalised_spans, decompose
from sleuth.policies.scripted import ScriptedPolicy, call, turn
from sleuth.policies.transcript import final_answer, parse_chunks, query_of
from sleuth.reward import compute_reward
from sleuth.tasks import Task, read_hotpotqa, save_tasks
from sleuth.tools.types import ChunkHit, ToolResult

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HOTPOT = SHARED_DATA / "hotpotqa_distractor_dev" / "hotpotqa200.json"

DOCS = {
    "paris": "Paris is the capital of France and its largest city.",
    "france": "France is a country in Western Europe; its capital is Paris.",
    "berlin": "Berlin is the capital of Germany.",
    "rhine": "The Rhine flows through Germany and the Netherlands.",
    "alps": "The Alps cross France, Switzerland and Italy.",
    "nile": "The Nile is a river in Africa.",
}


class KeywordTools:
    """``Tools`` over ``DOCS``, one chunk per document: a chunk matches a query sharing a word."""

    def search_corpus(
        self, query: str, exclude: Collection[str] = (), max_tokens: int | None = None
    ) -> ToolResult:
        words = set(re.findall(r"\w+", query.lower()))
        hits = [
            _hit(doc)
            for doc, text in DOCS.items()
            if words & set(re.findall(r"\w+", text.lower())) and f"{doc}_0" not in exclude
        ]
        return ToolResult(tool="search_corpus", chunks=hits[:10])

    def grep_corpus(
        self, pattern: str, exclude: Collection[str] = (), max_tokens: int | None = None
    ) -> ToolResult:
        return ToolResult(tool="grep_corpus")

    def read_document(
        self, doc_id: str, query: str | None = None, max_tokens: int | None = None
    ) -> ToolResult:
        if doc_id not in DOCS:
            return ToolResult(tool="read_document", error=f"unknown document {doc_id}")
        return ToolResult(tool="read_document", chunks=[_hit(doc_id)])


def _hit(doc: str) -> ChunkHit:
    return ChunkHit(id=f"{doc}_0", doc_id=doc, text=DOCS[doc], tokens=len(DOCS[doc].split()))


def make_tasks() -> list[Task]:
    """Six tasks over two domains and three hop levels."""
    specs = [
        ("t1", "capital of France", "Paris", ["paris", "france"], 1, "geo"),
        ("t2", "capital of Germany", "Berlin", ["berlin"], 1, "geo"),
        ("t3", "river through Germany", "Rhine", ["rhine"], 2, "geo"),
        ("t4", "mountains of Italy", "Alps", ["alps"], 2, "nature"),
        ("t5", "river in Africa", "Nile", ["nile"], 3, "nature"),
        ("t6", "city in Europe", "Paris", ["paris", "france"], 3, "nature"),
    ]
    return [
        Task(id=i, query=q, answer=a, gold_doc_ids=g, hops=h, domain=d, source="toy")
        for i, q, a, g, h, d in specs
    ]


class Probe:
    """Builds single-pass policies that log the queries they serve, sleep, or crash on one."""

    def __init__(self, sleep_s: float = 0.0, crash_on: str | None = None):
        self.sleep_s, self.crash_on = sleep_s, crash_on
        self.queries: list[str] = []
        self.active = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, seed: int) -> ScriptedPolicy:
        policy = make_policy("single-pass")
        play = policy.generate

        def generate(messages, tools, max_tokens):
            query = query_of(messages)
            if query == self.crash_on:
                raise KeyboardInterrupt  # escapes the harness, like a kill
            with self._lock:
                self.queries.append(query)
                self.active += 1
                self.peak = max(self.peak, self.active)
            time.sleep(self.sleep_s)
            with self._lock:
                self.active -= 1
            return play(messages, tools, max_tokens)

        policy.generate = generate
        return policy


def records_of(out: Path) -> list[dict]:
    return list(read_jsonl(out / "results.jsonl"))


# ---- score -------------------------------------------------------------------------------


def test_score_trajectory_shape_and_values_match_metrics_and_reward(tmp_path):
    task = make_tasks()[0]
    path = tmp_path / "run.jsonl"
    policy = ScriptedPolicy(
        [
            turn(call("search_corpus", query="capital"), call("search_corpus", query="river")),
            turn(call("prune_chunks", chunk_ids=["nile_0", "rhine_0"])),
            final_answer([("paris", "States it."), ("berlin", "Another capital.")]),
        ]
    )
    trajectory = Harness(KeywordTools(), policy).run(task.query, trajectory_path=path)
    scored = score_trajectory(task, path, beta=2.0).model_dump()

    required = {"final_answer_found", "recall", "precision", "f1", "trajectory_recall"}
    assert required | {"prune_accuracy", "turns", "tool_calls"} <= set(scored["metrics"])
    terms = {"total", "f_beta", "trajectory_recall", "answer_bonus", "prune_penalty"}
    assert terms | {"turn_penalty"} <= set(scored["reward"])
    summary = trajectory.summary()
    assert scored["metrics"] == compute_metrics(summary, task, beta=2.0).model_dump()
    assert scored["reward"]["f_beta"] == pytest.approx(5 * 0.5 * 0.5 / (4 * 0.5 + 0.5))
    # hand-computed: final [paris, berlin], gold {paris, france}: P = R = 1/2; both gold seen
    m = scored["metrics"]
    assert (m["recall"], m["precision"], m["trajectory_recall"]) == (0.5, 0.5, 1.0)
    assert (m["final_answer_found"], m["prune_accuracy"], m["turns"], m["tool_calls"]) == (
        True,
        1.0,
        3,
        3,
    )
    reward = compute_reward(summary, task)  # default β = 4 on both sides
    assert score_trajectory(task, path).reward == reward
    assert json.loads(json.dumps(scored)) == scored  # plain JSON, as `sleuth score --json`


def test_score_files_picks_the_task_by_query_or_id(tmp_path):
    tasks = make_tasks()
    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks))
    path = tmp_path / "run.jsonl"
    Harness(KeywordTools(), make_policy("single-pass")).run(tasks[1].query, trajectory_path=path)
    assert score_files(task_file, path) == score_trajectory(tasks[1], path)
    assert score_files(task_file, path, task_id="t1") == score_trajectory(tasks[0], path)
    with pytest.raises(InputError, match="no task with id"):
        score_files(task_file, path, task_id="nope")


# ---- runner: resume, concurrency, fusion ----------------------------------------------------


def test_runner_resumes_after_a_crash_without_rerunning_finished_queries(tmp_path):
    tasks = make_tasks()
    crashing = Probe(crash_on=tasks[3].query)
    with pytest.raises(KeyboardInterrupt):
        run_eval(
            tasks, crashing, KeywordTools(), tmp_path, EvalConfig(concurrency=1, progress=False)
        )
    done = [r["task_id"] for r in records_of(tmp_path)]
    assert done == ["t1", "t2", "t3"]  # one worker: queries run and finish in order
    with open(tmp_path / "results.jsonl", "a") as f:  # a crash mid-append leaves a torn line
        f.write('{"task_id": "t4", "metr')

    probe = Probe()
    summary = run_eval(
        tasks, probe, KeywordTools(), tmp_path, EvalConfig(concurrency=2, progress=False)
    )
    served = {t.query for t in tasks[3:]}
    assert set(probe.queries) == served and len(probe.queries) == 2 * len(served)  # 2 turns each
    assert sorted(r["task_id"] for r in records_of(tmp_path)) == [t.id for t in tasks]
    assert summary.overall["count"] == 6

    again = Probe()
    run_eval(tasks, again, KeywordTools(), tmp_path, EvalConfig(progress=False))
    assert again.queries == []  # everything finished: nothing runs


def test_resume_refuses_other_settings(tmp_path):
    run_eval(make_tasks()[:1], "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False))
    with pytest.raises(InputError, match="policy='single-pass'"):
        run_eval(
            make_tasks()[:1], "heuristic", KeywordTools(), tmp_path, EvalConfig(progress=False)
        )


def test_retry_failed_reruns_only_failed_queries(tmp_path):
    tasks = make_tasks()[:3]

    def broken(seed: int) -> ScriptedPolicy:
        return ScriptedPolicy(lambda messages, i: 1 / 0)  # a policy error: recorded, not raised

    run_eval(tasks, broken, KeywordTools(), tmp_path, EvalConfig(label="p", progress=False))
    assert all(r["error"] and r["metrics"]["failed"] for r in records_of(tmp_path))
    probe = Probe()
    kw = {"label": "p", "progress": False}
    summary = run_eval(tasks, probe, KeywordTools(), tmp_path, EvalConfig(retry_failed=True, **kw))
    assert len(probe.queries) == 2 * len(tasks)
    assert summary.overall["failed"] == 0.0


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_is_bounded(tmp_path, concurrency):
    probe = Probe(sleep_s=0.05)
    tools = KeywordTools()
    run_eval(
        make_tasks(), probe, tools, tmp_path, EvalConfig(concurrency=concurrency, progress=False)
    )
    assert probe.peak == concurrency


def test_fuse_rankings_is_hand_computed_rrf():
    # a: 1/61 + 1/62; b: 1/62 + 1/61 + 1/61; c: 1/63 + 1/61; d: 1/62 (k = 60, ranks from 1)
    lists = [["a", "b", "c"], ["b", "a"], ["b"], ["c", "d"]]
    assert fuse_rankings(lists) == ["b", "a", "c", "d"]
    assert fuse_rankings([["a_0", "a_1", "b_2"]]) == ["a", "b"]  # chunk ids count as documents


def test_four_rollouts_are_fused_by_rrf(tmp_path):
    task = Task(id="q", query="capital of France", answer="Paris", gold_doc_ids=["paris", "nile"])
    # each rollout searches one word and answers a fixed list (see the hand-computed test above)
    plans = [
        ("capital", ["paris", "berlin", "france"]),
        ("Germany", ["berlin", "paris"]),
        ("Germany", ["berlin"]),
        ("Africa", ["france", "nile"]),
    ]
    made: list[int] = []

    def factory(seed: int) -> ScriptedPolicy:
        word, answer = plans[len(made) % 4]
        made.append(1)
        why = [(doc, "listed") for doc in answer]
        return ScriptedPolicy([turn(call("search_corpus", query=word)), final_answer(why)])

    summary = run_eval(
        [task], factory, KeywordTools(), tmp_path, EvalConfig(rollouts=4, progress=False)
    )
    (record,) = records_of(tmp_path)
    assert record["final_docs"] == ["berlin", "paris", "france", "nile"]
    m = record["metrics"]
    assert (m["recall"], m["precision"]) == (1.0, 0.5)
    # ranked metrics of the fused list: paris 2nd, nile 4th
    assert (m["recall_at_2"], m["recall_at_5"], m["all_gold_at_5"]) == (0.5, 1.0, True)
    assert m["trajectory_recall"] == 1.0  # union: paris (rollout 1) and nile (rollout 4)
    assert m["final_answer_found"] is True
    per_rollout = [score_trajectory(task, tmp_path / p) for p in record["trajectories"]]
    assert [r.metrics.trajectory_recall for r in per_rollout] == [0.5, 0.0, 0.0, 0.5]
    assert record["reward"]["total"] == pytest.approx(mean(r.reward.total for r in per_rollout))
    assert m["turns"] == 2.0 and len(record["trajectories"]) == 4
    assert summary.fuse == "rrf" and summary.rollouts == 4


# ---- reports ---------------------------------------------------------------------------------


def check_report(out: Path, tasks: list[Task]) -> dict:
    """The report files exist, the HTML is self-contained, and summary.json equals a
    recomputation from results.jsonl."""
    for name in ["summary.json", "summary.md", "report.html", "results.jsonl", "run.json"]:
        assert (out / name).stat().st_size > 0
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 4 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    html = (out / "report.html").read_text()
    assert html.count("src='data:image/png;base64,") == 4
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", html)
    assert "<link" not in html and "<script" not in html
    assert "Example trajectory" in html

    summary = json.loads((out / "summary.json").read_text())
    records = {r["task_id"]: r for r in records_of(out)}
    assert set(records) == {t.id for t in tasks}
    overall = summary["overall"]
    assert overall["count"] == len(tasks)
    keys = ["recall", "recall_at_2", "recall_at_5", "recall_at_10", "all_gold_at_5"]
    for key in [*keys, "f1", "trajectory_recall", "turns", "final_answer_found"]:
        assert overall[key] == pytest.approx(mean(r["metrics"][key] for r in records.values()))
    assert overall["reward/total"] == pytest.approx(
        mean(r["reward"]["total"] for r in records.values())
    )
    for hops in {t.hops for t in tasks}:
        group = [r for r in records.values() if r["hops"] == hops]
        row = summary["by_hops"][str(hops)]
        assert row["count"] == len(group)
        assert row["recall"] == pytest.approx(mean(r["metrics"]["recall"] for r in group))
    md = (out / "summary.md").read_text()
    assert "## By hop level" in md and f"| all | {len(tasks)} |" in md
    header = next(line for line in md.splitlines() if line.startswith("| group |")).split(" | ")
    overall_cells = next(line for line in md.splitlines() if line.startswith("| all |"))
    for key, title in [("recall_at_5", "R@5"), ("all_gold_at_5", "all gold@5")]:
        cell = overall_cells.split(" | ")[header.index(title)]
        assert cell == f"{overall[key]:.3f}"
        assert f"<th>{title}</th>" in html
    return summary


def test_report_files_and_numbers(tmp_path):
    tasks = make_tasks()
    summary = run_eval(tasks, "heuristic", KeywordTools(), tmp_path, EvalConfig(progress=False))
    assert check_report(tmp_path, tasks) == summary.model_dump()
    assert set(summary.by_domain) == {"geo", "nature"}
    assert summary.by_domain["geo"]["count"] == 3


def test_bootstrap_interval_by_hand():
    assert bootstrap_interval([0.4] * 7) == pytest.approx((0.4, 0.4))
    # two values: resampled means are 0, 1/2, 1 with chances 1/4, 1/2, 1/4, so 2.5% and 97.5%
    # percentiles are the extremes
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    assert bootstrap_interval([0.0, 1.0], level=0.4) == (0.5, 0.5)
    with pytest.raises(ValueError):
        bootstrap_interval([])


def test_paired_bootstrap_cancels_question_difficulty():
    """Per-question scores that vary a lot but differ by exactly 0.1: the paired interval is
    the point 0.1, where intervals of the two means alone overlap widely."""
    base = [0.0, 1.0, 0.2, 0.9, 0.5, 0.1, 0.8, 0.3]
    better = [b + 0.1 for b in base]
    diff, (low, high) = paired_bootstrap_difference(better, base)
    assert diff == pytest.approx(0.1) and (low, high) == pytest.approx((0.1, 0.1))
    lo_a, hi_a = bootstrap_interval(base)
    assert hi_a - lo_a > 0.3
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap_difference([1.0], [1.0, 0.0])


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=30))
def test_bootstrap_interval_lies_within_the_data(values):
    low, high = bootstrap_interval(values, samples=200)
    assert min(values) - 1e-12 <= low <= high <= max(values) + 1e-12
    assert bootstrap_interval(values, samples=200) == (low, high)  # seeded: reproducible


# ---- baselines -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # the question first, then multi-word names, then a clause with a sub-question
        (
            "Which magazine was started first, Arthur's Magazine or First for Women?",
            [
                "Which magazine was started first, Arthur's Magazine or First for Women?",
                "Arthur's Magazine",
                "First for Women",
                "magazine was started first",
            ],
        ),
        # quoted titles are searched as written
        (
            'Who created "Wallace and Gromit" and a zoo comedy?',
            [
                'Who created "Wallace and Gromit" and a zoo comedy?',
                "Wallace and Gromit",
                "a zoo comedy",
                "Wallace",
            ],
        ),
    ],
)
def test_decompose(question, expected):
    assert decompose(question, max_queries=4) == expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("The Bank of England was founded in 1694.", ["Bank of England"]),  # "The" opens it
        ("He met Pete Doherty. Which band?", ["Pete Doherty"]),  # "Which" is a stopword
        ("Apollo 11 landed.", ["Apollo 11"]),  # numbers continue a name
        # an abbreviation's or an initial's dot ends no sentence, and the name keeps it
        ("It is on Warner Bros. Records. Sales rose.", ["Warner Bros. Records", "Sales"]),
        ("It was made by Paul L. Stein in St. Louis.", ["Paul L. Stein", "St. Louis"]),
        ("It ended with World War I. Then peace came.", ["World War I"]),  # a stopword ends it
        ("Mr. Smith came.", ["Smith"]),  # an honorific is no part of the name
        ("It won the 1988 World Series in 1988.", ["1988 World Series"]),  # a year opens a title
    ],
)
def test_capitalised_spans(text, names):
    assert capitalised_spans(text) == names


def test_transcript_parsing_recovers_chunks_without_the_usage_line():
    text = (
        "# DOCUMENT ID: a_0 (3 tokens)\nfirst text\n\n"
        "# DOCUMENT ID: b_1 (2 tokens)\nsecond\n\npara\n\n[Token usage: 10/100]"
    )
    assert [(c.id, c.text) for c in parse_chunks(text)] == [
        ("a_0", "first text"),
        ("b_1", "second\n\npara"),
    ]


def test_single_pass_answers_with_the_search_order(tmp_path):
    trajectory = Harness(KeywordTools(), make_policy("single-pass")).run("capital of Germany")
    assert trajectory.answer is not None and not trajectory.answer.malformed
    assert trajectory.answer.doc_ids == ["paris", "france", "berlin", "rhine"]
    assert [len(t.tool_events) for t in trajectory.turns] == [1, 0]


def tools_for(spec: str, tools):
    return build_policy(spec).tools(tools)


def test_make_policy_rejects_unknown_names():
    with pytest.raises(InputError, match="unknown policy"):
        make_policy("oracle")
    with pytest.raises(InputError, match="MODEL@BASE_URL"):
        make_policy("openai:gpt")
    assert make_policy("openai:m@http://127.0.0.1:9/v1").name == "openai-chat:m"
    with pytest.raises(InputError, match="needs a Toolbox"):
        tools_for("bm25", KeywordTools())


# ---- end to end on a real HotpotQA sample ----------------------------------------------------


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory):
    """20 HotpotQA questions and an index of their pooled paragraphs (real MiniLM)."""
    if not HOTPOT.exists():
        pytest.skip(f"HotpotQA sample not found at {HOTPOT}")
    from sleuth.index import Index
    from sleuth.tools.toolbox import Toolbox

    docs, tasks = read_hotpotqa(HOTPOT)
    tasks = tasks[:20]
    wanted = {d for t in tasks for d in [*t.gold_doc_ids, *t.distractor_doc_ids]}
    path = tmp_path_factory.mktemp("hotpot") / "index"
    Index.create(path, embedder="minilm").ingest([d for d in docs if d.id in wanted])
    return tasks, Toolbox(Index.open(path))


def test_end_to_end_single_pass_and_heuristic_on_hotpotqa(hotpot, tmp_path):
    tasks, toolbox = hotpot
    results = {"single-pass": run_eval(tasks, "single-pass", toolbox, tmp_path / "single-pass")}
    save_tasks(tmp_path / "tasks.jsonl", tasks)  # the heuristic goes the `sleuth eval` way
    results["heuristic"] = sleuth.evaluate(
        tmp_path / "tasks.jsonl",
        index=toolbox.index.path,
        out=tmp_path / "heuristic",
        policy="heuristic",
    )
    for policy in results:
        check_report(tmp_path / policy, tasks)
    single, heuristic = results["single-pass"].overall, results["heuristic"].overall
    assert single["recall"] > 0.6 and single["turns"] == 2.0
    assert heuristic["trajectory_recall"] >= single["trajectory_recall"]
    assert heuristic["tool_calls_per_turn"] > single["tool_calls_per_turn"]


def test_bm25_and_dense_toolboxes_rank_by_one_retriever(hotpot):
    _, toolbox = hotpot
    query = "Which magazine was started first, Arthur's Magazine or First for Women?"
    index = toolbox.index
    expected = {
        "lexical": [i for i, _ in index.lexical_search(query, 10)],
        "dense": [i for i, _ in index.dense_search(index.embedder.embed_query(query), 10)],
    }
    for retriever, ids in expected.items():
        hits = RetrieverToolbox(toolbox, retriever).search_corpus(query).chunks
        assert [h.id for h in hits] == ids[: len(hits)] and hits
    assert isinstance(tools_for("dense", toolbox), RetrieverToolbox)
    assert tools_for("single-pass", toolbox) is toolbox


def test_trajectories_of_the_runner_load(tmp_path):
    tasks = make_tasks()[:2]
    run_eval(tasks, "single-pass", KeywordTools(), tmp_path, EvalConfig(progress=False))
    for record in records_of(tmp_path):
        trajectory = load_trajectory(tmp_path / record["trajectories"][0])
        assert trajectory.query == record["query"] and trajectory.policy == "single-pass"
        assert isinstance(trajectory.turns[0].output, PolicyOutput)
