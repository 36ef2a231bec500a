"""The grep index after an update moves the postings of the rows it keeps and reads only the new
ones, and answers as a build of the new rows does."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sleuth.index.grepindex as grepindex
from sleuth.index.grepindex import GrepIndex

WORDS = ["Alpha", "alpha", "ALPHA", "beta", "Straße", "STRASSE", "école", "x1", "gamma-ray", "é"]
text_st = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)


def _postings(index: GrepIndex) -> dict[str, list[int]]:
    names = index.vocab.split("\n") if len(index.starts) else []
    return {
        t: index.postings[index.offsets[i] : index.offsets[i + 1]].tolist()
        for i, t in enumerate(names)
    }


@settings(max_examples=80, deadline=None)
@given(
    before=st.lists(text_st, max_size=12),
    after=st.lists(st.tuples(st.booleans(), st.integers(0, 11), text_st), max_size=14),
)
def test_an_updated_index_has_the_postings_of_a_build(before, after):
    old = GrepIndex.build(before)
    # Row i of the new list: row j of the old one when it is kept (once at most), else new.
    sources, texts, used = [], [], set()
    for keep, j, text in after:
        if keep and j < len(before) and j not in used:
            used.add(j)
            sources.append(j)
            texts.append(before[j])
        else:
            sources.append(-1)
            texts.append(text)
    updated = old.updated(np.asarray(sources, dtype=np.int64), texts)
    full = GrepIndex.build(texts)
    assert _postings(updated) == _postings(full)
    assert updated.n_rows == full.n_rows == len(texts)
    for literal in ("alpha", "ALP", "strasse", "Straße", "cole", "x1", "ray", "é", "zzz"):
        a, b = updated.literal_rows(literal), full.literal_rows(literal)
        assert (a is None and b is None) or (a is not None and b is not None and set(a) == set(b))


def test_kept_rows_are_not_read_again():
    old = GrepIndex.build(["alpha beta", "gamma delta", "epsilon"])
    read = []
    real = grepindex.fold

    def counted(text, table):
        read.append(text)
        return real(text, table)

    with patch.object(grepindex, "fold", counted):
        updated = old.updated(np.array([2, -1, 0]), ["epsilon", "zeta beta", "alpha beta"])
    assert read == ["zeta beta"]
    assert _postings(updated) == {"alpha": [2], "beta": [1, 2], "epsilon": [0], "zeta": [1]}


def test_ingest_updates_the_saved_grep_index_as_a_build_would(tmp_path):
    from sleuth.corpus.models import Document
    from sleuth.index import Index

    docs = {f"d{i}": f"Alpha note {i}: beta {i * 7} x{i}" for i in range(8)}
    Index.create(tmp_path / "ix", embedder="hash:64").ingest(
        [Document(id=d, text=t) for d, t in docs.items()]
    )
    docs.pop("d2")
    docs["d3"] = "Straße école, revised"
    docs["new"] = "gamma-ray burst"
    index = Index.create(tmp_path / "ix", embedder="hash:64")
    with patch.object(GrepIndex, "updated", autospec=True, side_effect=GrepIndex.updated) as spy:
        index.ingest([Document(id=d, text=t) for d, t in docs.items()], delete_missing=True)
    assert spy.call_count == 1
    lexical = Index.open(tmp_path / "ix").lexical
    assert sorted(r.doc_id for r in lexical.rows) == sorted(docs)
    assert lexical.grep_index is not None  # the saved one, not one built on opening
    assert _postings(lexical.grep) == _postings(GrepIndex.build([r.text for r in lexical.rows]))
