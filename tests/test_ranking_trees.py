"""The ranker's heads as a union (linear | trees), columns picked by name, and chain features."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sleuth.errors import InputError
from sleuth.ranking import (
    FEATURE_GROUPS,
    SEARCH_COLUMNS,
    SELECTION_COLUMNS,
    LinearHead,
    RankerModel,
    Search,
    SeenDoc,
    TreeHead,
    fit_head,
    fit_trees,
    load_ranker,
)
from sleuth.ranking.chain import CHAIN_COLUMNS, chain_features, search_parents
from sleuth.ranking.features import COVER_COLUMNS
from sleuth.train.ranker import RankerTrainConfig


def _planted(groups: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Groups of 12 rows; the one gold row has a high column 0 and a low column 1, among noise
    where each of those alone also runs high in some non-gold rows."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(groups):
        x = rng.normal(size=(12, 3))
        x[rng.integers(12, size=2), 0] += 4.0  # decoys high on column 0 only
        x[rng.integers(12), 1] -= 4.0  # a decoy low on column 1 only
        y = np.zeros(12, dtype=np.int64)
        gold = int(rng.integers(12))
        x[gold, 0] += 4.0
        x[gold, 1] -= 4.0
        y[gold] = 1
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys), [12] * groups


def test_lambdarank_trees_rank_the_planted_gold_first_on_new_groups():
    x, y, groups = _planted(120, seed=1)
    head = fit_trees(x, y, groups, ["a", "b", "c"], rounds=60)
    test_x, test_y, test_groups = _planted(40, seed=2)
    scores = head.score(test_x)
    firsts = [
        int(test_y[i * 12 + int(np.argmax(scores[i * 12 : (i + 1) * 12]))])
        for i in range(len(test_groups))
    ]
    assert np.mean(firsts) >= 0.9
    # Platt scaling makes the score log-odds: gold rows average above 50%, the rest far below.
    probs = 1 / (1 + np.exp(-scores))
    assert probs[test_y == 1].mean() > 0.5 > 0.1 > probs[test_y == 0].mean()


def test_tree_head_round_trips_through_json_and_scores_identically(tmp_path):
    x, y, groups = _planted(40, seed=3)
    columns = list(SELECTION_COLUMNS[:3])
    trees = fit_trees(x, y, groups, columns, rounds=20)
    search = fit_head(x, y, ["rrf", "bm25_rr", "dense_rr"])
    model = RankerModel(search=search, selection=trees, question_ids=["q1"])
    model.save(tmp_path / "r.json")
    loaded = load_ranker(tmp_path / "r.json")
    assert isinstance(loaded.selection, TreeHead) and isinstance(loaded.search, LinearHead)
    assert json.loads((tmp_path / "r.json").read_text())["selection"]["kind"] == "trees"
    assert loaded.selection.score(x).tolist() == trees.score(x).tolist()
    table = np.zeros((len(x), len(SELECTION_COLUMNS)), dtype=np.float32)
    table[:, :3] = x
    assert loaded.score_selection(table).tolist() == trees.score(x).tolist()


def test_a_version_1_linear_file_still_loads_and_scores(tmp_path):
    def head(columns):
        n = len(columns)
        return {"columns": list(columns), "mean": [0.0] * n, "scale": [1.0] * n,
                "weights": [1.0] * n, "bias": 0.0}  # fmt: skip

    new = (*CHAIN_COLUMNS, *COVER_COLUMNS)  # columns added after version 1
    old_selection = [c for c in SELECTION_COLUMNS if c not in new]
    v1 = {"schema_version": 1, "search": head(SEARCH_COLUMNS), "selection": head(old_selection),
          "question_ids": ["q"]}  # fmt: skip
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    model = load_ranker(tmp_path / "v1.json")
    assert model.schema_version == 1 and model.selection.kind == "linear"
    table = np.ones((2, len(SELECTION_COLUMNS)), dtype=np.float32)
    table[:, [SELECTION_COLUMNS.index(c) for c in new]] = 100.0  # never read
    assert model.score_selection(table).tolist() == [len(old_selection)] * 2


@pytest.mark.parametrize("learner", ["linear", "gbdt"])
def test_a_head_trained_on_some_columns_scores_the_same_after_a_new_column(learner):
    x, y, groups = _planted(60, seed=4)
    columns = ["a", "b", "c"]
    if learner == "gbdt":
        head: LinearHead | TreeHead = fit_trees(x, y, groups, columns, rounds=20)
    else:
        head = fit_head(x, y, columns)
    expected = head.score(x)
    wider = np.column_stack([x[:, 0], np.full(len(x), 7.0), x[:, 2], x[:, 1]]).astype(x.dtype)
    got = head.score(wider, ["a", "new", "c", "b"])
    np.testing.assert_allclose(got, expected, rtol=1e-12)  # the same up to summation order
    with pytest.raises(ValueError):
        head.score(wider)  # an unnamed table must be the head's own columns


def test_a_model_needing_a_column_this_version_lacks_is_refused(tmp_path):
    search = LinearHead(columns=list(SEARCH_COLUMNS), mean=[0.0] * 8, scale=[1.0] * 8,
                        weights=[1.0] * 8, bias=0.0)  # fmt: skip
    future = search.model_copy(update={"columns": [*SEARCH_COLUMNS[:7], "from_the_future"]})
    RankerModel(search=future, selection=search).save(tmp_path / "f.json")
    with pytest.raises(InputError, match="from_the_future"):
        load_ranker(tmp_path / "f.json")


def test_learner_is_checked_and_groups_cover_the_selection_columns():
    with pytest.raises(InputError, match="learner 'forest'"):
        RankerTrainConfig(learner="forest")
    grouped = [c for cols in FEATURE_GROUPS.values() for c in cols]
    assert sorted(grouped) == sorted(SELECTION_COLUMNS) and len(set(grouped)) == len(grouped)


def test_chain_features_follow_which_document_led_to_which():
    question = "Where was the director of Blue Harbor born, and what is its river?"
    docs = [
        SeenDoc("blue", "Blue Harbor", "Blue Harbor is a film directed by Ana Lind.", [(0, 1)]),
        SeenDoc("ana", "Ana Lind", "Ana Lind was born in Oslo.", [(1, 1)]),
        SeenDoc("oslo", "Oslo", "Oslo lies on the Akerselva river.", [(2, 1)]),
        SeenDoc("noise", "Weather", "Rain in spring.", [(0, 2), (1, 2)]),
    ]
    searches = [Search(question, 0), Search("Ana Lind born river", 1), Search("Oslo river", 2)]
    assert search_parents(docs, searches) == [None, 0, 1]
    relevance = [0.8, 0.3, 0.2, 0.0]
    x = chain_features(question, docs, searches, relevance)
    col = {n: [round(float(v), 4) for v in x[:, i]] for i, n in enumerate(CHAIN_COLUMNS)}
    assert col["chain_depth"] == [0.0, round(1 / 3, 4), round(2 / 3, 4), 0.0]
    assert col["parent_rel"] == [0.0, 0.8, 0.3, 0.8]  # noise was also shown by blue's search
    assert col["child_rel"] == [0.3, 0.2, 0.0, 0.0]
    assert col["led_searches"] == [round(np.log(2), 4)] * 2 + [0.0, 0.0]
    # Oslo's chain (Oslo ← Ana Lind ← Blue Harbor) covers more of the question than Oslo alone.
    assert col["chain_cover"][2] > col["chain_cover"][3]
    # Ana Lind holds the name Blue Harbor led to ("Ana Lind"), Oslo the one Ana Lind led to; a
    # document's own bridge name does not count for it (Blue Harbor, Ana Lind's "Oslo").
    assert col["name_held"] == [0.0, 0.8, 0.3, 0.0]
    assert col["name_title"] == [0.0, 0.8, 0.3, 0.0]
    assert col["names_held"] == [0.0, round(np.log(2), 4), round(np.log(2), 4), 0.0]


def test_name_columns_need_the_bridge_name_not_the_search_or_the_question():
    question = "Where is the headquarters of the publisher of Bamboo Among the Oaks?"
    docs = [
        SeenDoc(
            "book",
            "Bamboo Among the Oaks",
            "Bamboo Among the Oaks was published by the Minnesota Historical Society Press.",
            [(0, 1)],
        ),  # fmt: skip
        SeenDoc("deere", "John Deere World Headquarters", "A headquarters in Moline.", [(1, 1)]),
        SeenDoc(
            "center",
            "Minnesota History Center",
            "Home of the Minnesota Historical Society Press, a headquarters and museum.",
            [(1, 4)],
        ),  # fmt: skip
        SeenDoc("review", "Book reviews", "A review of Bamboo Among the Oaks.", [(2, 1)]),
    ]
    searches = [
        Search(question, 0),
        Search("Minnesota Historical Society Press headquarters", 1),
        Search("Bamboo Among the Oaks review", 2),  # a name from the question: no bridge
    ]
    x = chain_features(question, docs, searches, [0.9, 0.2, 0.2, 0.1])
    held = x[:, CHAIN_COLUMNS.index("name_held")].tolist()
    assert [round(v, 4) for v in held] == [0.0, 0.0, 0.9, 0.0]
    assert x[:, CHAIN_COLUMNS.index("name_title")].tolist() == [0.0] * 4  # no title holds it


def test_a_bridge_name_most_seen_documents_hold_marks_nothing():
    question = "When did the sender of the outage notice reply?"
    notice = SeenDoc("n", "Outage", "Subject: outage. From Kay Dorn.", [(0, 1)])
    mails = [SeenDoc(f"m{i}", f"Mail {i}", f"Subject: lunch {i}", [(1, i + 1)]) for i in range(12)]
    reply = SeenDoc("r", "Re: outage", "Subject: re. Kay Dorn replied.", [(2, 1)])
    docs = [notice, *mails, reply]
    searches = [Search(question, 0), Search("Subject outage reply", 1), Search("Kay Dorn reply", 2)]
    relevance = [0.9] + [0.1] * 13
    x = chain_features(question, docs, searches, relevance)
    held = x[:, CHAIN_COLUMNS.index("name_held")]
    # "Subject" (every mail holds it) marks none of them; "Kay Dorn" (only the reply) marks it.
    assert held[1:13].tolist() == [0.0] * 12 and held[13] == pytest.approx(0.9)
    assert x[13, CHAIN_COLUMNS.index("names_held")] == pytest.approx(np.log(2))
