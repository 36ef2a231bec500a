"""Metadata filters: one ``where`` grammar with the same semantics on the dense
side (Chroma) and the lexical/grep side (our evaluator); ``describe_corpus``; the tool set an
adapter keeps; the default policy's conservative filters."""

from __future__ import annotations

import datetime as dt
import json
import random
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sleuth.corpus.email import parse_message
from sleuth.corpus.models import Document
from sleuth.corpus.readers import read_documents_jsonl
from sleuth.errors import InputError
from sleuth.harness.loop import Harness, HarnessConfig
from sleuth.index import Index
from sleuth.index.where import check_where, matches
from sleuth.policies.filters import has_filter_cue, question_filter
from sleuth.policies.manifest import PolicyManifest
from sleuth.policies.spec import build_policy
from sleuth.tools.spec import DESCRIBE, ORIGINAL_TOOLS, TOOL_NAMES
from sleuth.tools.toolbox import Toolbox
from tests.test_cli import sleuth

SENDERS = ["a@x.com", "b@x.com", "c@x.com"]


def _metadata(rng: random.Random) -> dict:
    meta: dict = {}
    if rng.random() < 0.8:
        meta["from"] = rng.choice(SENDERS)
    if rng.random() < 0.8:
        meta["n"] = rng.choice([rng.randint(0, 9), rng.randint(0, 9) + 0.5])
    if rng.random() < 0.7:
        meta["flag"] = rng.random() < 0.5
    if rng.random() < 0.8:
        meta["date"] = datetime(2001, rng.randint(1, 12), rng.randint(1, 28), 13, tzinfo=UTC)
    return meta


DOCS = [
    Document(id=f"m{i}", text=f"common words for message {i}", metadata=_metadata(random.Random(i)))
    for i in range(48)
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    path = tmp_path_factory.mktemp("meta") / "index"
    Index.create(path, embedder="hash:64").ingest(DOCS)
    return Index.open(path)


_STRINGS = st.sampled_from([*SENDERS, "zz"])
_NUMBERS = st.one_of(st.integers(-1, 10), st.sampled_from([0.5, 2.0, 4.5, 9.5]))
_SCALARS = st.one_of(_STRINGS, _NUMBERS, st.booleans())
_DAYS = st.dates(datetime(2000, 12, 1).date(), datetime(2002, 1, 31).date()).map(str)


def _same_type_list(draw_from: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(draw_from, min_size=1, max_size=3)


@st.composite
def _leaf(draw: st.DrawFn) -> dict:
    field = draw(st.sampled_from(["from", "n", "flag", "date", "title"]))
    op = draw(st.sampled_from(["", "$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte"]))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        operand = draw(_DAYS if field == "date" and draw(st.booleans()) else _NUMBERS)
    elif op in ("$in", "$nin"):
        operand = draw(st.one_of(_same_type_list(_STRINGS), _same_type_list(st.integers(-1, 10))))
    elif field == "date" and op in ("", "$eq") and draw(st.booleans()):
        operand = draw(_DAYS)
    else:
        operand = draw(_SCALARS)
    return {field: operand} if op == "" else {field: {op: operand}}


_WHERE = st.recursive(
    _leaf(),
    lambda inner: st.builds(
        lambda key, parts: {key: parts},
        st.sampled_from(["$and", "$or"]),
        st.lists(inner, min_size=2, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=_WHERE)
def test_both_sides_filter_exactly_like_brute_force(index, where):
    """Chroma's own filter (the dense side), the lexical mask, grep and a brute-force pass of the
    evaluator over every document's metadata pick the same documents."""
    try:
        checked = index.check_where(where)
    except InputError:  # a string compared with a date field other than by $eq or a range
        assume(False)
    metas = index.lexical.doc_meta
    brute = {d for d, meta in metas.items() if matches(checked, meta)}
    chroma = {m["doc_id"] for m in index.collection.get(where=checked)["metadatas"]}
    mask = index.rows_matching(checked)
    lexical = {index.lexical.rows[i].doc_id for i in range(len(mask)) if mask[i]}
    assert chroma == brute == lexical
    hits = index.lexical_search("common words", len(DOCS), where=checked)
    assert {index.chunk(cid).doc_id for cid, _ in hits} == brute
    qvec = index.embedder.embed_query("common words")
    dense = {index.chunk(cid).doc_id for cid, _ in index.dense_search(qvec, 100, where=checked)}
    assert dense == brute


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({}, "exactly one key"),
        ({"from": "a@x.com", "n": 1}, "exactly one key"),
        ({"$and": [{"from": "a@x.com"}]}, "at least two"),
        ({"$not": {"from": "a"}}, "unknown operator '$not'"),
        ({"from": {"$gt": "a"}}, "needs a number"),
        ({"from": {"$in": []}}, "non-empty list"),
        ({"from": {"$in": ["a", 1]}}, "same type"),
        ({"from": {"$eq": None}}, "string, number or boolean"),
        ({"from": {"$eq": "a", "$ne": "b"}}, "exactly one operator"),
        ({"from": {"$like": "a"}}, "unknown operator '$like'"),
        ({"sender": "a@x.com"}, "unknown field 'sender'"),
        ({"date": {"$gte": "May 2001"}}, "not an ISO date"),
        ({"date": {"$in": ["2001-05-01"]}}, "ranges"),
        ("from", "must be an object"),
    ],
)
def test_bad_where_is_a_one_line_error(index, where, message):
    with pytest.raises(InputError, match=None) as caught:
        index.check_where(where)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    result = Toolbox(index).search_corpus("common", where=where)
    assert result.error is not None and message in result.error and not result.chunks
    assert Toolbox(index).grep_corpus("common", where=where).error == result.error


def test_dates_filter_by_iso_day_and_range(index):
    toolbox = Toolbox(index)
    may = {"$and": [{"date": {"$gte": "2001-05-01"}}, {"date": {"$lt": "2001-06-01"}}]}
    got = {c.doc_id for c in toolbox.grep_corpus("common", where=may).chunks}
    in_may = {d.id for d in DOCS if "date" in d.metadata and d.metadata["date"].month == 5}
    assert got <= in_may and len(got) == min(len(in_may), 5)
    one = next(d for d in DOCS if "date" in d.metadata)
    day = {"date": one.metadata["date"].date().isoformat()}
    assert one.id in {c.doc_id for c in toolbox.search_corpus("common words", where=day).chunks}


def test_describe_corpus_on_a_hand_built_corpus(tmp_path):
    docs = [
        Document(
            id="e1",
            text="gas",
            metadata={"from": "a@x.com", "date": datetime(2001, 5, 4, tzinfo=UTC), "size": 3},
        ),
        Document(
            id="e2",
            text="power",
            metadata={"from": "a@x.com", "date": datetime(2001, 7, 1, tzinfo=UTC), "size": 7},
        ),
        Document(id="e3", text="oil", title="Oil", metadata={"from": "b@x.com", "urgent": True}),
    ]
    Index.create(tmp_path / "i", embedder="hash:64").ingest(docs)
    assert json.loads((tmp_path / "i" / "fields.json").read_text())["documents"] == 3
    index = Index.open(tmp_path / "i")
    assert index.describe()["fields"] == {
        "date": {"type": "date", "documents": 2, "min": "2001-05-04", "max": "2001-07-01"},
        "from": {
            "type": "string",
            "documents": 3,
            "distinct": 2,
            "values": {"a@x.com": 2, "b@x.com": 1},
        },
        "size": {"type": "int", "documents": 2, "min": 3, "max": 7},
        "title": {"type": "string", "documents": 3, "distinct": 2, "values": {"": 2, "Oil": 1}},
        "urgent": {"type": "bool", "documents": 1, "distinct": 1, "values": {"true": 1}},
    }
    result = Toolbox(index).describe_corpus()
    assert result.ok and '"a@x.com": 2' in result.chunks[0].text
    small = Toolbox(index).describe_corpus(max_tokens=130)
    assert small.chunks and small.chunks[0].tokens <= 130 and "left out" in small.chunks[0].text


def test_cli_where_and_describe(index):
    path = str(index.path)
    ok = sleuth("tools", "search", "common", "--index", path, "--where", '{"from": "b@x.com"}')
    assert ok.returncode == 0, ok.stderr
    b_docs = {d.id for d in DOCS if d.metadata.get("from") == "b@x.com"}
    shown = {
        line.split()[3].rsplit("_", 1)[0] for line in ok.stdout.splitlines() if "# DOC" in line
    }
    assert shown and shown <= b_docs
    grep = sleuth("tools", "grep", "words", "--index", path, "--where", '{"flag": true}', "--json")
    assert grep.returncode == 0 and json.loads(grep.stdout)
    for bad in ('{"sender": "x"}', "{oops", '{"from": {"$gt": "a"}}'):
        out = sleuth("tools", "search", "common", "--index", path, "--where", bad)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    described = sleuth("tools", "describe", "--index", path)
    assert described.returncode == 0 and "- from:" in described.stdout


def test_an_adapter_keeps_the_tools_it_was_trained_with():
    h = {
        "budget": 8192,
        "per_call_tokens": 1024,
        "reply_reserve": 512,
        "max_turns": 6,
        "max_reply_tokens": 160,
        "max_documents": 5,
        "system_prompt": "You search.",
    }
    tools = {"search_max_chunks": 2, "ranker": True}
    old = PolicyManifest(schema_version=0, harness=h, tools=tools)  # no tool list: the four
    assert old.apply(HarnessConfig()).tools == ORIGINAL_TOOLS
    new = PolicyManifest(harness=h, tools=tools, tool_names=list(TOOL_NAMES))
    assert new.apply(HarnessConfig()).tools == tuple(TOOL_NAMES)
    assert new.apply(HarnessConfig()).budget.total == 8192
    assert HarnessConfig().tools == tuple(TOOL_NAMES)
    trained = HarnessConfig(tools=ORIGINAL_TOOLS)
    recorded = PolicyManifest.of_training(trained, 2, True, "m", [], "sft")
    assert recorded.tool_names == list(ORIGINAL_TOOLS)
    assert PolicyManifest(harness=h, tools=tools, tool_names=["teleport"]).unknown_tools()


DESCRIPTION = """Corpus: 9 documents.
Fields:
- date: {"type": "date", "min": "1999-01-04", "max": "2002-02-01"}
- form: {"type": "string", "distinct": 2, "values": {"10-K": 3, "8-K": 2}}
- from: {"type": "string", "distinct": 40, "top_values": {"steven.kean@enron.com": 9, "mark.taylor@enron.com": 4}}"""


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did jeff.skilling@enron.com say about gas?", {"from": "jeff.skilling@enron.com"}),
        ("What did Steven Kean write about the ISO?", {"from": "steven.kean@enron.com"}),
        ("Who emailed a@x.com and b@y.com?", None),  # two senders: ambiguous, no filter
        (  # a day, with a day of slack each side (local day vs UTC)
            "What was said on May 4, 2001?",
            {"$and": [{"date": {"$gte": "2001-05-03"}}, {"date": {"$lte": "2001-05-05"}}]},
        ),
        (
            "Which email in March 2000 mentioned Dabhol?",
            {"$and": [{"date": {"$gte": "2000-02-29"}}, {"date": {"$lte": "2000-04-01"}}]},
        ),
        ("What happened in 1995?", None),  # outside the corpus's dates
        ("Which 8-K reports the merger?", {"form": "8-K"}),
        ("Which river flows through Egypt?", None),
    ],
)
def test_the_default_policy_filters_only_unambiguous_questions(question, expected):
    assert question_filter(question, DESCRIPTION) == expected
    if expected is not None:
        assert has_filter_cue(question)
        check_where(expected, {"date": "date", "form": "string", "from": "string"})


def _events(trajectory) -> list:
    return [e for t in trajectory.turns for e in t.tool_events]


def test_the_default_policy_describes_then_filters_when_the_question_names_a_sender(index):
    tools, factory = build_policy("heuristic").for_tools(Toolbox(index))
    b_docs = {d.id for d in DOCS if d.metadata.get("from") == "b@x.com"}
    run = Harness(tools, factory(0)).run("Which common words did b@x.com send?")
    events = _events(run)
    assert events[0].name == DESCRIBE.name
    filtered = [e for e in events if e.arguments and "where" in e.arguments]
    assert filtered and all(e.arguments["where"] == {"from": "b@x.com"} for e in filtered)
    assert {c.doc_id for e in filtered for c in e.result.chunks} <= b_docs
    assert run.answer is not None and run.answer.doc_ids[0] in b_docs  # filtered documents lead
    plain = Harness(tools, factory(0)).run("Which message has common words?")  # no cue
    assert all(
        e.name != DESCRIBE.name and "where" not in (e.arguments or {}) for e in _events(plain)
    )
    # an adapter trained on the original four: never offered describe_corpus, never describes
    old = Harness(tools, factory(0), HarnessConfig(tools=ORIGINAL_TOOLS))
    assert all(e.name != DESCRIBE.name for e in _events(old.run("What did b@x.com send?")))


def test_readers_keep_dates_as_dates(tmp_path):
    lines = [
        {"id": "j1", "text": "a", "metadata": {"day": "2001-05-04", "at": "2001-05-04T17:01:00Z"}},
        {"id": "j2", "text": "b", "metadata": {"day": "not a date", "n": 3}},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    first, second = read_documents_jsonl(path)
    assert first.metadata["day"] == dt.date(2001, 5, 4)
    assert first.metadata["at"] == datetime(2001, 5, 4, 17, 1, tzinfo=UTC)
    assert second.metadata == {"day": "not a date", "n": 3}
    raw = b"From: a@x.com\nDate: Thu, 26 Apr 2001 17:01:00 -0700\nSubject: Hi\n\nbody"
    sent = parse_message(raw, "m.eml", fallback_id="m").metadata["date"]
    assert sent == datetime(2001, 4, 27, 0, 1, tzinfo=UTC)  # aware; stored as epoch seconds
    assert "date" not in parse_message(raw.replace(b"Thu, 26", b"Someday"), "m", "m").metadata
