"""``IndexFields.rows_matching`` keeps the last few filter masks: a kept mask equals a fresh
evaluation, callers may mask the copy they get, the cache stays bounded, and an ingest that
changes the documents' metadata is seen by the very next call."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sleuth.corpus.models import Document
from sleuth.errors import InputError
from sleuth.index import Index
from sleuth.index.lexical import MASKS_KEPT
from sleuth.index.where import matches
from tests.test_metadata_filters import _WHERE, DOCS


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    path = tmp_path_factory.mktemp("masks") / "index"
    Index.create(path, embedder="hash:64").ingest(DOCS)
    return Index.open(path)


def _fresh(index: Index, where: dict) -> list[bool]:
    return index.lexical.rows_where(lambda meta: matches(where, meta)).tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wheres=st.lists(_WHERE, min_size=1, max_size=6), order=st.randoms())
def test_kept_masks_equal_fresh_ones_and_stay_bounded(index, wheres, order):
    try:
        checked = [index.check_where(w) for w in wheres]
    except InputError:
        assume(False)
    asked = [*checked, *order.sample(checked * 3, len(checked) * 3)]  # repeats, in any order
    for where in asked:
        mask = index.rows_matching(where)
        assert mask.tolist() == _fresh(index, where)
        mask[:] = ~mask  # the caller's copy: the kept mask is untouched
        assert index.rows_matching(where).tolist() == _fresh(index, where)
    assert len(index.lexical.kept_masks) <= MASKS_KEPT


def test_an_ingest_that_changes_metadata_is_seen_at_once(tmp_path):
    docs = [Document(id=f"d{i}", text=f"text {i}", metadata={"k": "a"}) for i in range(6)]
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    index.ingest(docs)
    where = index.check_where({"k": "b"})
    assert not index.rows_matching(where).any()
    index.ingest([Document(id="d2", text="text 2 changed", metadata={"k": "b"})])
    mask = index.rows_matching(where)
    assert mask.tolist() == _fresh(index, where) and mask.sum() == 1
    assert index.lexical.rows[int(mask.argmax())].doc_id == "d2"
