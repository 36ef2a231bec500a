"""Final-answer parsing (table-driven, one comment per case)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleuth.harness.answer import parse_answer
from sleuth.policies.transcript import final_answer

KNOWN = {"a_0": "a", "a_1": "a", "b_0": "b", "report_2023_4": "report_2023", "c_2": "c"}


def doc(i: str, j: str = "Shows it.") -> str:
    return f'<Document id="{i}">\n<Justification>{j}</Justification>\n</Document>'


@pytest.mark.parametrize(
    ("text", "ids", "doc_ids", "malformed"),
    [
        # well formed, quoted ids, chunk ids map to their documents
        (doc("a_1") + "\n" + doc("b_0"), ["a_1", "b_0"], ["a", "b"], False),
        # unquoted, single-quoted and braced ids are all accepted
        (
            "<Document id=a_1><Justification>x</Justification></Document>"
            "<Document id='b'><Justification>y</Justification></Document>"
            "<Document id={c_2}><Justification>z</Justification></Document>",
            ["a_1", "b", "c_2"],
            ["a", "b", "c"],
            False,
        ),
        # two chunks of one document: both kept, document listed once
        (doc("a_0") + doc("a_1"), ["a_0", "a_1"], ["a"], False),
        # a repeated id is dropped
        (doc("b_0") + doc("b_0"), ["b_0"], ["b"], False),
        # a doc id ending in digits resolves through the seen chunks, not by stripping
        (doc("report_2023_4"), ["report_2023_4"], ["report_2023"], False),
        # a missing </Document> is tolerated
        (
            '<Document id="a_1"><Justification>x</Justification>\n<Document id="b_0">',
            ["a_1", "b_0"],
            ["a", "b"],
            False,
        ),
        # no block at all: malformed, fallback to seen ids in order of mention
        ("The best are c_2 and then a_0.", ["c_2", "a_0"], ["c", "a"], True),
        # nothing usable
        ("I could not find anything.", [], [], True),
    ],
)
def test_parse_answer(text, ids, doc_ids, malformed):
    parsed = parse_answer(text, known_chunks=KNOWN)
    assert [d.id for d in parsed.documents] == ids
    assert parsed.doc_ids == doc_ids
    assert parsed.malformed is malformed
    assert [d.rank for d in parsed.documents] == list(range(1, len(ids) + 1))


def test_justification_and_problems():
    parsed = parse_answer(doc("a_1", "Names the  river.\n It flows north.") + '<Document id="x">')
    assert parsed.documents[0].justification == "Names the river. It flows north."
    assert any("x: no justification" in p for p in parsed.problems)


def test_cap_at_max_documents():
    parsed = parse_answer("".join(doc(f"d{i}") for i in range(35)), max_documents=30)
    assert len(parsed.documents) == 30 and not parsed.malformed
    assert any("35 documents" in p for p in parsed.problems)


def test_empty_text_falls_back_to_reasoning():
    parsed = parse_answer("  ", reasoning="Best: b_0, then a_1.", known_chunks=KNOWN)
    assert parsed.malformed and parsed.doc_ids == ["b", "a"]
    assert parsed.problems == ["empty answer"]


def test_unknown_ids_are_noted_not_dropped():
    parsed = parse_answer(doc("zzz_9"), known_chunks=KNOWN)
    assert parsed.doc_ids == ["zzz"] and any("never shown" in p for p in parsed.problems)


@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=4))
def test_written_justifications_parse_back_as_written(whys):
    """``final_answer`` escapes each justification; parsing decodes it, whatever it quotes
    (tags, ampersands, quotes), up to collapsed whitespace."""
    entries = [(f"d{i}", why) for i, why in enumerate(whys)]
    parsed = parse_answer(final_answer(entries))
    assert [d.id for d in parsed.documents] == [doc for doc, _ in entries]
    assert [d.justification for d in parsed.documents] == [" ".join(w.split()) for w in whys]
