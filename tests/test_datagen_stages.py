"""The LLM task pipeline, stage by stage, recorded against a scripted server and replayed offline.

The corpus is a handful of invented documents whose facts the script knows: a first hop whose
answer is an observatory, and a second hop that bridges through "valley mills" to the city an
engineer was born in. The scripted model reads the documents, submits (once with a year in a
clue, which must be rejected), quotes the documents verbatim, proposes distractors and judges.
"""

from __future__ import annotations

import json
import random
import re
import socket

import pytest

from sleuth.corpus.models import Document
from sleuth.datagen.pipeline.distract import rejection
from sleuth.datagen.pipeline.domains import get_domain
from sleuth.datagen.pipeline.explore import seed_records
from sleuth.datagen.pipeline.extract import verify
from sleuth.datagen.pipeline.llm import ChatLLM, LLMConfig
from sleuth.datagen.pipeline.records import (
    STAGES,
    Hop,
    RecordStore,
    Seed,
    Status,
    SupportingDoc,
    TaskRecord,
)
from sleuth.datagen.pipeline.runner import DatagenConfig, Pipeline, run_stage
from sleuth.datagen.pipeline.stages import run_named_stage, run_pipeline
from sleuth.datagen.pipeline.workspace import Session, Workspace
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.tasks import load_tasks
from tests.openai_stub import answering_server, call, json_reply, reply

DOCS = {
    "corven": ("Tessaly Corven", "Tessaly Corven was a glassmaker who trained as a lens grinder in "
               "a coastal town. In 1881 she ground the lens for the first telescope of the Marrow "
               "Hill Observatory."),
    "marrow": ("Marrow Hill Observatory", "The Marrow Hill Observatory is a hilltop observatory "
               "above a river valley. Its dome was rebuilt after a storm destroyed the original "
               "roof. Astronomers there catalogued over four hundred variable stars."),
    "storm": ("Storm of the Long Night", "The Storm of the Long Night was a winter gale that "
              "destroyed the roof of the Marrow Hill Observatory and flooded the valley mills. "
              "Rain fell for three days without pause."),
    "pellin": ("Pellin Ridge Observatory", "The Pellin Ridge Observatory is a hilltop observatory "
               "whose roof was damaged by a winter gale. A glassmaker from the coast repaired its "
               "lens."),
    "museum": ("Glassmakers' Museum", "Visitors to the Marrow Hill Observatory often stop at the "
               "glassmakers' museum, which shows lenses ground by coastal craftsmen."),
    "guide": ("Valley Guidebook", "A walk along the ridge passes the old observatory. Its dome was "
              "rebuilt after a storm destroyed the original roof. The path then descends to the "
              "river."),
    "mills": ("Valley Mills", "The valley mills were rebuilt by the engineer Odran Vesk after the "
              "flood. He later designed a canal lock downstream."),
    "vesk": ("Odran Vesk", "Odran Vesk was an engineer born in the harbor city of Lisk. He rebuilt "
             "several mills."),
    "lock": ("Corran Lock", "Corran Lock is a canal lock designed by Odran Vesk. It opened to "
             "barges after the mills were restored."),
    "ferry": ("Harbor Families", "Odran Vesk, an engineer, was born in the harbor city of Lisk, "
              "where his father kept a ferry."),
    "choir": ("Hill Choir", "A choir sang each winter in the dome of a hilltop observatory after "
              "a gale."),
    "baker": ("Old Town Bakery", "A baker in the old town sold rye bread to the mill workers."),
}  # fmt: skip

CLUES = [
    "A glassmaker who learned her craft grinding lenses by the sea supplied its first lens.",
    "Its roof had to be rebuilt after a winter gale.",
    "The same gale also flooded the mills of the valley below it.",
]
QUOTES = {
    "corven": [
        {"quote": "Tessaly Corven was a glassmaker who trained as a lens grinder in a coastal "
                  "town.", "clue_indices": [0]},
        {"quote": "she ground the lens for the first telescope of the Marrow Hill Observatory",
         "clue_indices": [0]},
    ],
    "marrow": [{"quote": "Its dome was rebuilt after a storm destroyed the original roof.",
                "clue_indices": [1]}],
    "storm": [{"quote": "destroyed the roof of the Marrow Hill Observatory and flooded the valley "
               "mills", "clue_indices": [1], "clue_spans": ["flooded the mills of the valley"]}],
    "mills": [{"quote": "The valley mills were rebuilt by the engineer Odran Vesk after the flood.",
               "clue_indices": [0]}],
    "lock": [{"quote": "Corran Lock is a canal lock designed by Odran Vesk.", "clue_indices": [1]}],
    "vesk": [{"quote": "Odran Vesk was an engineer born in the harbor city of Lisk.",
              "clue_indices": [2]}],
}  # fmt: skip
EXPLORE_ARGS = {
    "supporting": [
        {"doc_id": "corven", "fact": "she ground the observatory's first lens"},
        {"doc_id": "marrow", "fact": "its dome was rebuilt after a storm"},
        {"doc_id": "storm", "fact": "the gale also flooded the valley mills"},
    ],
    "clues": CLUES,
    "question": "Which hilltop observatory do these clues describe?",
    "answer": "Marrow Hill Observatory",
    "answer_aliases": ["Marrow Hill"],
    "truth_type": "building or landmark",
}
HOP_ARGS = {
    "bridge_doc_id": "mills",
    "from_doc_id": "storm",
    "shared_fact": "valley mills",
    "bridging_clue": "The mills flooded by that gale were rebuilt by an engineer.",
    "supporting": [
        {"doc_id": "lock", "fact": "the engineer designed a canal lock"},
        {"doc_id": "vesk", "fact": "the engineer's birthplace"},
    ],
    "clues": ["That engineer later designed a canal lock downstream.",
              "The engineer came from a harbor city."],
    "question": "In which harbor city was that engineer born?",
    "answer": "Lisk",
    "truth_type": "location",
}  # fmt: skip


def _turn(body) -> int:
    return sum(m["role"] == "assistant" for m in body["messages"])


def _tools(body) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def _schema(body) -> str:
    return (body.get("response_format") or {}).get("json_schema", {}).get("name", "")


def _user_text(body) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def _answer_in_prompt(body) -> str:
    return re.search(r"^Answer: (.*)$", body["messages"][-1]["content"], re.MULTILINE).group(1)


def _doc_in_prompt(body) -> str:
    return re.search(r"(?:Document|Passage) (\S+):\n<", body["messages"][-1]["content"]).group(1)


def scripted_model(quotes=QUOTES):
    """The responder: plays each stage's part from the request it receives."""

    def respond(body):
        tools, schema, turn = _tools(body), _schema(body), _turn(body)
        if "submit_task" in tools:
            if turn == 0:
                return reply(
                    calls=[call("read_document", doc_id=d) for d in ("corven", "marrow", "storm")]
                )
            clues = [CLUES[0].replace("its first lens", "its first lens in 1881"), *CLUES[1:]]
            args = EXPLORE_ARGS | ({"clues": clues} if turn == 1 else {})
            return reply(calls=[call("submit_task", **args)])
        if "submit_hop" in tools:
            if turn == 0:
                return reply(
                    calls=[call("read_document", doc_id=d) for d in ("mills", "lock", "vesk")]
                )
            return reply(calls=[call("submit_hop", **HOP_ARGS)])
        if "submit_distractors" in tools:
            if turn == 0:
                return reply(calls=[call("search_corpus", query="hilltop observatory gale")])
            picks = ["ferry", "baker"] if "Lisk" in _user_text(body) else ["pellin", "museum"]
            return reply(
                calls=[call("submit_distractors", distractors=[{"doc_id": d} for d in picks])]
            )
        if schema == "quotes":
            return json_reply({"quotes": quotes.get(_doc_in_prompt(body), [])})
        if schema == "judgement":
            return json_reply({"contains_answer": _doc_in_prompt(body) == "choir"})
        if schema == "equivalence":
            same = _doc_in_prompt(body).startswith("ferry_")
            quote = "Odran Vesk, an engineer, was born in the harbor city of Lisk"
            return json_reply({"same_fact": same, "quote": quote if same else ""})
        raise AssertionError(f"unscripted request: tools={tools} schema={schema!r}")

    return respond  # fmt: skip


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    path = tmp_path_factory.mktemp("datagen") / "index"
    docs = [Document(id=i, title=t, text=x) for i, (t, x) in DOCS.items()]
    built = Index.create(path, embedder="hash", chunk_tokens=96, overlap_tokens=16)
    built.ingest(docs)
    return Index.open(path)


@pytest.fixture(scope="module")
def workspace(index):
    return Workspace.open(index)


def make_pipeline(workspace, run_dir, cache_dir, mode, server=None, **config) -> Pipeline:
    llm_config = LLMConfig(
        model="scripted",
        base_url=server.base_url if server else "http://127.0.0.1:9/v1",
        cache_dir=cache_dir,
        mode=mode,
        backoff_s=0.01,
    )
    settings = {"target_hops": 2, "progress": False} | config
    return Pipeline(
        store=RecordStore(run_dir),
        ws=workspace,
        llm=ChatLLM(llm_config, run_dir),
        domain=get_domain("web"),
        config=DatagenConfig(**settings),
        source="fixture",
    )


@pytest.fixture(scope="module")
def recorded(workspace, tmp_path_factory):
    """One full two-hop run recorded against the scripted server."""
    root = tmp_path_factory.mktemp("recorded")
    with answering_server(scripted_model()) as server:
        pipeline = make_pipeline(workspace, root / "run", root / "cache", "record", server)
        summary = run_pipeline(pipeline, n=1)
    return pipeline, summary, server.requests, root


def test_recorded_run_produces_a_verified_two_hop_task(recorded):
    pipeline, summary, _, _ = recorded
    assert summary.tasks == 1, summary
    record = next(iter(pipeline.store))
    assert all(record.status(s) == Status.PASSED for s in STAGES), record.stages
    task = record.task
    assert task.hops == 2 and task.answer == "Lisk" and task.domain == "web"
    assert task.gold_doc_ids == ["corven", "marrow", "storm", "mills", "lock", "vesk"]
    assert task.query == " ".join([*CLUES, *[HOP_ARGS["bridging_clue"], *HOP_ARGS["clues"]],
                                   HOP_ARGS["question"]])  # fmt: skip
    assert [h["answer"] for h in task.model_extra["gold_per_hop"]] == [
        "Marrow Hill Observatory",
        "Lisk",
    ]
    assert record.hops[1].bridge.from_doc_id == "storm"
    assert task.model_extra["generator"] == "llm-pipeline"


def test_explore_rejects_a_clue_with_a_year_and_accepts_the_fix(recorded):
    pipeline, _, _, root = recorded
    transcript = json.loads(next((root / "run" / "transcripts").glob("*.explore.json")).read_text())
    results = [m["content"] for m in transcript if m["role"] == "tool"]
    assert any("clue 0 contains an exact year" in r for r in results)
    assert results[-1] == "Accepted."


def test_distractors_containing_the_answer_are_rejected_before_any_llm_call(recorded):
    pipeline, _, requests, _ = recorded
    record = next(iter(pipeline.store))
    first, second = record.hops
    assert first.rejected_distractors["museum"] == "contains_answer"
    assert second.rejected_distractors["ferry"] == "contains_answer"
    assert first.rejected_distractors["choir"] == "judge_contains_answer"
    judged = {
        (_answer_in_prompt(r), _doc_in_prompt(r)) for r in requests if _schema(r) == "judgement"
    }
    assert {("Marrow Hill Observatory", "choir"), ("Marrow Hill Observatory", "pellin")} <= judged
    answer_bearing = {("Marrow Hill Observatory", "museum"), ("Lisk", "ferry")}
    assert not judged & answer_bearing, "answer-bearing candidates must never reach the judge"
    assert "pellin" in record.task.distractor_doc_ids
    assert not {"museum", "ferry", "choir"} & set(record.task.distractor_doc_ids)


def test_expand_groups_equivalent_chunks_and_drops_them_from_distractors(recorded):
    pipeline, _, _, _ = recorded
    task = next(iter(pipeline.store)).task
    groups = {frozenset(g) for g in task.gold_chunk_groups}
    assert frozenset({"marrow_0", "guide_0"}) in groups  # verbatim repeat elsewhere
    assert frozenset({"vesk_0", "ferry_0"}) in groups  # near duplicate the LLM confirmed
    assert len(task.gold_chunk_groups) == 6  # 7 quotes; corven's two share one chunk, merged
    assert "guide" not in task.distractor_doc_ids


def test_ledger_and_report_cover_every_llm_stage(recorded):
    _, summary, _, root = recorded
    ledger = json.loads((root / "run" / "ledger.json").read_text())["stages"]
    assert set(ledger) == {"explore", "verify", "distract", "extend", "expand"}
    assert all(row["live_calls"] > 0 and row["prompt_tokens"] > 0 for row in ledger.values())
    report = json.loads((root / "run" / "quality.json").read_text())
    assert report["answer_in_distractor_rate"] == 0.0
    assert report["hop_histogram"] == {"2": 1}


def test_replay_reproduces_the_run_offline(recorded, workspace, tmp_path, monkeypatch):
    pipeline, summary, requests, root = recorded
    seen = len(requests)

    def refuse(*args, **kwargs):
        raise AssertionError("replay opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    again = make_pipeline(workspace, tmp_path / "replay", root / "cache", "replay")
    replay_summary = run_pipeline(again, n=1)
    assert len(requests) == seen
    assert replay_summary.tasks == summary.tasks == 1
    original, replayed = next(iter(pipeline.store)), next(iter(again.store))
    assert replayed.task == original.task
    assert replayed.hops == original.hops
    ledger = json.loads((tmp_path / "replay" / "ledger.json").read_text())["stages"]
    assert all(row["live_calls"] == 0 for row in ledger.values())


class InterruptAfter:
    """Passes calls through, then raises KeyboardInterrupt on call number ``k + 1``."""

    def __init__(self, llm, k: int):
        self.llm, self.left = llm, k

    def complete(self, messages, **kwargs):
        if self.left == 0:
            raise KeyboardInterrupt("simulated Ctrl-C")
        self.left -= 1
        return self.llm.complete(messages, **kwargs)


def test_interrupted_stage_resumes_without_duplicating_or_losing_records(workspace, tmp_path):
    with answering_server(scripted_model()) as server:
        pipeline = make_pipeline(workspace, tmp_path / "run", tmp_path / "cache", "auto", server)
        assert run_named_stage(pipeline, "explore", n=3) == {Status.PASSED: 3}
        assert seed_records(pipeline, 3) == 0  # seeding again adds nothing
        real = pipeline.llm
        pipeline.llm = InterruptAfter(real, k=3)  # one record = 3 extraction calls
        with pytest.raises(KeyboardInterrupt):
            run_stage(pipeline, "verify", verify)
        statuses = [r.status("verify") for r in pipeline.store]
        assert statuses == [Status.PASSED, Status.PENDING, Status.PENDING]
        pipeline.llm = real
        assert run_stage(pipeline, "verify", verify) == {Status.PASSED: 2}
    records = list(pipeline.store)
    assert [r.id for r in records] == ["web-0-00000", "web-0-00001", "web-0-00002"]
    assert len(list((tmp_path / "run" / "records").iterdir())) == 3
    assert all(r.status("verify") == Status.PASSED and r.attempts["verify"] == 1 for r in records)
    assert run_stage(pipeline, "verify", verify) == {}  # nothing left to do


def test_verification_failures_are_kept_as_reasons_in_the_status(workspace, tmp_path):
    bad = dict(QUOTES)
    bad["corven"] = [
        {"quote": "Tessaly Corven was a potter from the mountains.", "clue_indices": [0]}
    ]
    bad["marrow"] = []
    with answering_server(scripted_model(bad)) as server:
        pipeline = make_pipeline(workspace, tmp_path / "run", tmp_path / "cache", "auto", server)
        run_named_stage(pipeline, "explore", n=1)
        assert run_named_stage(pipeline, "verify") == {Status.FAILED: 1}
        assert run_named_stage(pipeline, "distract") == {}  # failed records go no further
    state = next(iter(pipeline.store)).stages["verify"]
    assert state.status == Status.FAILED and state.at
    assert "quote_not_found: corven" in state.reason
    assert "no_quotes: marrow" in state.reason
    assert "clue_unsupported: clue 0" in state.reason


class RefusingLLM:
    def complete(self, messages, **kwargs):
        raise AssertionError("the judge must not be called for these candidates")


def test_answer_check_runs_before_the_judge(workspace, tmp_path):
    pipeline = make_pipeline(workspace, tmp_path / "run", tmp_path / "cache", "replay")
    pipeline.llm = RefusingLLM()
    hop = Hop(
        clues=CLUES,
        question="Which hilltop observatory do these clues describe?",
        answer="Marrow Hill Observatory",
        truth_type="building or landmark",
        supporting=[SupportingDoc(doc_id="marrow")],
    )
    assert rejection(pipeline, hop, "museum", {"marrow"}, "distract") == "contains_answer"
    assert rejection(pipeline, hop, "marrow", {"marrow"}, "distract") == "supporting_document"
    assert rejection(pipeline, hop, "nope", {"marrow"}, "distract") == "unknown_document"


MIXED = [
    Document(id="acme-10k", title="ACME CORP 10-K", metadata={"company": "ACME CORP"},
             text="The company leases its main office in Tulsa. Revenue grew modestly."),
    Document(id="acme-8k", title="ACME CORP 8-K", metadata={"company": "ACME CORP"},
             text="The board approved a new warehouse near the river port."),
    Document(id="zeta-10k", title="ZETA INC 10-K", metadata={"company": "ZETA INC"},
             text="Zeta opened an office in Tulsa for its drilling unit."),
    Document(id="m1", title="budget", text="Bob, send the budget figures.",
             metadata={"thread_id": "t1", "from": "alice@x.com", "to": "bob@x.com"}),
    Document(id="m2", title="RE: budget", text="Alice, figures attached.",
             metadata={"thread_id": "t1", "from": "bob@x.com", "to": "alice@x.com"}),
    Document(id="m3", title="lunch", text="Carol, lunch at the harbor grill?",
             metadata={"thread_id": "t2", "from": "bob@x.com", "to": "carol@x.com"}),
    Document(id="m4", title="rota", text="Erin, the weekend rota is posted.",
             metadata={"thread_id": "t3", "from": "dave@x.com", "to": "erin@x.com"}),
    Document(id="US100", title="Lens cleaner", text="Patent US100: a lens cleaner with a brush.",
             metadata={"cited_patents": "US50 US999", "date": "2001-01-01"}),
    Document(id="US50", title="Brush", text="Patent US50: a soft brush for optical lenses.",
             metadata={"cited_patents": "", "date": "1990-01-01"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "index"
    Index.create(path, embedder="hash", chunk_tokens=96, overlap_tokens=16).ingest(MIXED)
    return Workspace.open(Index.open(path))


def _tool(session, domain: str, name: str):
    tools = session.base_tools() + get_domain(domain).tools(session)
    return next(t.handler for t in tools if t.name == name)


def test_sec_explorer_sees_only_its_company(mixed):
    domain = get_domain("sec")
    scope = domain.scope_docs(mixed.docs, "ACME CORP")
    assert scope == ["acme-10k", "acme-8k"]
    session = Session(mixed, random.Random(0), scope=scope)
    assert "acme-10k" in session.search("office in Tulsa") and "zeta" not in session.search("Tulsa")
    assert "zeta" not in _tool(session, "sec", "grep_corpus")("Tulsa")
    assert "zeta" not in _tool(session, "sec", "random_chunks")()
    assert "zeta" not in _tool(session, "sec", "list_filings")()
    assert _tool(session, "sec", "search_filing")("zeta-10k", "office").startswith("Error")
    assert session.read("zeta-10k").startswith("Error")
    pick = domain.pick_seed(mixed.docs, random.Random(1))
    assert set(pick.doc_ids) <= set(domain.scope_docs(mixed.docs, pick.scope))


def test_email_tools_follow_threads_and_people(mixed):
    session = Session(mixed, random.Random(0))
    thread = _tool(session, "email", "get_thread")("t1")
    assert "DOCUMENT ID: m1" in thread and "DOCUMENT ID: m2" in thread and "m3" not in thread
    related = _tool(session, "email", "related_threads")("t1")
    assert "t2" in related and "bob@x.com" in related and "t3" not in related
    assert "m3" in _tool(session, "email", "search_person")("carol", "lunch")
    assert "m4" not in _tool(session, "email", "random_person_emails")("carol")


def test_patent_tools_find_prior_art_in_the_corpus(mixed):
    session = Session(mixed, random.Random(0))
    cited = _tool(session, "patents", "cited_references")("US100")
    assert cited.startswith("2 cited patents, 1 of them in the corpus") and "US50" in cited
    assert "US50" in _tool(session, "patents", "earlier_similar_patents")("US100")
    assert get_domain("patents").pick_seed(mixed.docs, random.Random(0)).doc_ids == ["US100"]


def test_a_record_that_keeps_crashing_fails_after_max_attempts(workspace, tmp_path):
    pipeline = make_pipeline(workspace, tmp_path / "run", tmp_path / "cache", "replay")
    pipeline.store.add(TaskRecord(id="r1", domain="web", seed=Seed(truth_type="person")))

    def crash(pipeline, record):
        raise RuntimeError("endpoint down")

    for _ in range(3):
        assert run_stage(pipeline, "explore", crash) == {Status.ERROR: 1}
    assert run_stage(pipeline, "explore", crash) == {Status.FAILED: 1}
    state = pipeline.store.load("r1").stages["explore"]
    assert state.reason == "error_limit: 3 attempts, last: RuntimeError: endpoint down"
    assert run_stage(pipeline, "explore", crash) == {}


def test_new_records_start_with_every_stage_pending(tmp_path):
    record = TaskRecord(id="r1", domain="web", seed=Seed(truth_type="date"))
    assert {s: record.status(s) for s in STAGES} == dict.fromkeys(STAGES, Status.PENDING)
    assert record.ready_for("explore") and not record.ready_for("verify")
    record.mark("explore", Status.PASSED)
    assert record.ready_for("verify") and not record.ready_for("explore")
    store = RecordStore(tmp_path)
    assert store.add(record) and not store.add(record)
    assert store.load("r1") == record
    with pytest.raises(InputError, match="not a safe file name"):
        store.path("../escape")


def test_single_hop_run_assembles_the_task_without_extending(workspace, tmp_path):
    with answering_server(scripted_model()) as server:
        pipeline = make_pipeline(
            workspace, tmp_path / "run", tmp_path / "cache", "auto", server, target_hops=1
        )
        summary = run_pipeline(pipeline, n=1, out=tmp_path / "tasks.jsonl")
        assert not any("submit_hop" in _tools(r) for r in server.requests)
    assert summary.tasks == 1
    (task,) = load_tasks(tmp_path / "tasks.jsonl")
    assert task.hops == 1 and task.answer == "Marrow Hill Observatory"
    assert task.gold_doc_ids == ["corven", "marrow", "storm"]
    assert task.query.endswith("Which hilltop observatory do these clues describe?")
