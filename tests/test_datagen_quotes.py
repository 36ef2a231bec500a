"""The strict quote matcher (property tests) and the deterministic extraction verifier."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sleuth.datagen.evidence import (
    FailReason,
    QuoteEvidence,
    answer_in_text,
    reason_code,
    verify_extraction,
)
from sleuth.datagen.quotes import normalize, quote_in_source

# Letters, digits, spaces, punctuation and the Unicode variants normalize() folds. Combining marks
# and conjoining scripts are left out: a substring cut between a base and its mark is not a
# substring of the composed source, which is Unicode, not the matcher.
_CATEGORIES = ("Lu", "Ll", "Nd", "Zs", "Pd", "Pi", "Pf", "Ps", "Pe", "Po", "Sc")
_TEXT = st.text(
    st.characters(categories=_CATEGORIES) | st.sampled_from("\n\t\u00a0\u2026\u00ad\u200b"),
    max_size=80,
)


_QUOTE_PART = st.text(
    st.characters(categories=("Lu", "Ll", "Zs", "Po")) | st.sampled_from("0123456789")
)


def _digit_free(text: str) -> bool:
    return not any(c.isdigit() for c in normalize(text))


_DIGIT_FREE_TEXT = st.text(
    st.characters(categories=[c for c in _CATEGORIES if c != "Nd"]) | st.sampled_from("\n\u00a0"),
    max_size=80,
).filter(_digit_free)


# --- normalize and quote_in_source: table ----------------------------------------------------


@pytest.mark.parametrize(
    ("quote", "source", "expected"),
    [
        (
            "Alice Washburn (1860-1929)",
            "Alice Washburn( 1860\u2013 1929) was",
            True,
        ),  # spacing, dash
        ("\u201cThe Jewel\u201d", 'like "the jewel" in', True),  # curly quotes, case
        ("Lang's final", "Walter Lang \u2018s final film", True),  # apostrophe variant, spacing
        ("and so on...", "and so on\u2026", True),  # ellipsis character
        ("born June 9", "born\u00a0June\n 9", True),  # NBSP and newline are whitespace
        ("ＡＢＣ 12", "the abc 12 group", True),  # full-width forms (NFKC)
        ("co\u00adoperate", "cooperate", True),  # soft hyphen is invisible
        ("3.5 million", "it cost 35 million", False),  # the decimal point is kept
        ("35 million", "it cost 3.5 million", False),
        ("1,000 men", "about 1000 men", False),  # so is the thousands separator
        ("$5.2 million", "US revenue 52 million", False),  # the public pipeline's false positive
        ("revenue grew", "revenue, grew", False),  # other punctuation is kept
        ("grew fast", "revenue grew quickly", False),  # no partial or fuzzy matches
        ("", "anything", False),  # an empty quote never matches
        ("   ", "a   b", False),  # nor does whitespace
        ("...", "wait...", False),  # nor bare punctuation
    ],
)
def test_quote_in_source_table(quote: str, source: str, expected: bool) -> None:
    assert quote_in_source(quote, source) is expected


def test_normalize_folds_formatting_only() -> None:
    assert normalize("  A\u00a0 B\u2014C  ") == "a b-c"
    assert normalize("Washburn( 1860- 1929)") == normalize("Washburn (1860 - 1929)")
    assert normalize("3.5") == "3.5"


# --- properties ------------------------------------------------------------------------------


@given(_TEXT)
def test_normalize_is_idempotent(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)


@given(_TEXT, st.data())
def test_any_substring_of_the_normalised_source_matches(source: str, data: st.DataObject) -> None:
    norm = normalize(source)
    assume(norm)
    i = data.draw(st.integers(0, len(norm) - 1))
    j = data.draw(st.integers(i + 1, len(norm)))
    sub = norm[i:j]
    assume(any(c.isalnum() for c in sub))
    assert quote_in_source(sub, source)


@given(
    st.data(),
    _DIGIT_FREE_TEXT,
    _DIGIT_FREE_TEXT,
    _QUOTE_PART,
    _QUOTE_PART,
    st.sampled_from("0123456789"),
)
def test_one_changed_digit_never_matches(
    data: st.DataObject, prefix: str, suffix: str, left: str, right: str, digit: str
) -> None:
    # Every digit of the source lies inside the quote, and the changed quote has its digits at
    # the same relative positions, so it could only match where the quote is, and it differs
    # there. Hence any match would be the matcher conflating digits.
    quote = left + digit + right
    changed = left + data.draw(st.sampled_from("0123456789").filter(lambda d: d != digit)) + right
    source = f"{prefix} {quote} {suffix}"
    assert quote_in_source(quote, source)
    assert not quote_in_source(changed, source)


_TOKEN = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFéüøł0123456789"), min_size=5, max_size=5
)


@given(st.lists(_TOKEN, min_size=3, max_size=12, unique_by=str.casefold), st.data())
def test_one_changed_word_never_matches(tokens: list[str], data: st.DataObject) -> None:
    # Tokens are distinct (case-insensitively), of one length and single-spaced, so a quote of
    # two or more whole tokens can only align with token boundaries, and its unchanged token
    # pins it to the one place where the original word stands.
    start = data.draw(st.integers(0, len(tokens) - 2))
    end = data.draw(st.integers(start + 2, len(tokens)))
    target = data.draw(st.integers(start, end - 1))
    replacement = data.draw(_TOKEN.filter(lambda t: t.casefold() != tokens[target].casefold()))
    source = " ".join(tokens)
    quote = tokens[start:end]
    changed = [*quote[: target - start], replacement, *quote[target - start + 1 :]]
    assert quote_in_source(" ".join(quote), source)
    assert not quote_in_source(" ".join(changed), source)


_DIGITS = st.text(st.sampled_from("0123456789"), min_size=1, max_size=6)


@given(_DIGITS, _DIGITS, st.sampled_from(".,"))
def test_decimal_points_are_never_dropped(whole: str, frac: str, sep: str) -> None:
    number = f"{whole}{sep}{frac}"
    assert number in normalize(f"about {number} units")
    assert not quote_in_source(number, f"about {whole}{frac} units")
    assert not quote_in_source(f"{whole}{frac}", f"about {number} units")


# --- answer_in_text --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "aliases", "text", "expected"),
    [
        ("Paris", [], "He moved to Paris, France.", True),
        ("Paris", [], "a Parisian cafe", False),  # whole words only
        ("paris", [], "PARIS", True),  # case-insensitive
        ("Ed Wood (film)", ["Ed Wood"], "Ed Wood is a 1994 film", True),  # an alias counts
        ("1950", [], "in the 1950s", False),
        ("3", [], "grew 3.5 times", False),  # a number is not split at its decimal point
        ("5", [], "grew 3.5 times", False),
        ("3", [], "a score of 3.", True),  # a full stop is not a decimal point
        ("C++", [], "written in C++ and C", True),  # non-word edges still need a boundary
        ("Xawery Żuławski", [], "directed by Xawery\u00a0Żuławski", True),
        ("", [], "anything", False),
        ("", ["  "], "anything", False),
    ],
)
def test_answer_in_text(answer: str, aliases: list[str], text: str, expected: bool) -> None:
    assert answer_in_text(answer, aliases, text) is expected


# --- verify_extraction: each failure mode ---------------------------------------------------

_DOCS = {
    "a": "Polish-Russian War is a 2009 Polish film directed by Xawery Żuławski.",
    "b": "Xawery Żuławski (born 22 December 1971) is a Polish film director.",
}
_CLUES = ["[X] is a film made by [Y].", "[Y] is a director born in December."]
_GOOD = {
    "a": [QuoteEvidence(quote="Polish film directed by Xawery Żuławski", clue_indices=[0])],
    "b": [QuoteEvidence(quote="born 22 December 1971", clue_spans=["born in December"])],
}


def _verify(
    extraction: dict[str, list[QuoteEvidence]] = _GOOD,
    clues: list[str] = _CLUES,
    answer: str = "Polish-Russian War",
    aliases: tuple[str, ...] = (),
    question: str = "Which film is [X]?",
) -> list[str]:
    result = verify_extraction(_DOCS, clues, answer, aliases, extraction, question=question)
    assert result.passed is (not result.reasons)
    return [reason_code(r) for r in result.reasons]


def _with(doc_id: str, *quotes: QuoteEvidence) -> dict[str, list[QuoteEvidence]]:
    return {**_GOOD, doc_id: list(quotes)}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, []),  # the reference extraction passes
        (  # an empty quote list fails (no vacuous pass), and leaves its clue unsupported
            {"extraction": _with("b")},
            [FailReason.NO_QUOTES, FailReason.CLUE_UNSUPPORTED],
        ),
        (  # so does a supporting document missing from the extraction
            {"extraction": {"a": _GOOD["a"]}},
            [FailReason.NO_QUOTES, FailReason.CLUE_UNSUPPORTED],
        ),
        (  # a quote that is not in its own document (it is in the other one)
            {"extraction": _with("b", QuoteEvidence(quote="2009 Polish film", clue_indices=[1]))},
            [FailReason.QUOTE_NOT_FOUND, FailReason.CLUE_UNSUPPORTED],
        ),
        (  # one changed digit in a quote
            {
                "extraction": _with(
                    "b", QuoteEvidence(quote="born 22 December 1972", clue_indices=[1])
                )
            },
            [FailReason.QUOTE_NOT_FOUND, FailReason.CLUE_UNSUPPORTED],
        ),
        (  # the second clue has no quote
            {"extraction": _with("b", QuoteEvidence(quote="born 22 December 1971"))},
            [FailReason.CLUE_UNSUPPORTED],
        ),
        (  # an index past the clue list
            {
                "extraction": _with(
                    "b", QuoteEvidence(quote="born 22 December", clue_indices=[1, 7])
                )
            },
            [FailReason.BAD_CLUE_INDEX],
        ),
        (  # a clue span that is in no clue
            {"extraction": _with("b", QuoteEvidence(quote="born 22", clue_spans=["born in May"]))},
            [FailReason.CLUE_SPAN_NOT_FOUND, FailReason.CLUE_UNSUPPORTED],
        ),
        (  # a document that is not a supporting document
            {"extraction": {**_GOOD, "z": [QuoteEvidence(quote="x", clue_indices=[0])]}},
            [FailReason.UNKNOWN_DOCUMENT],
        ),
        ({"answer": "Andrzej Żuławski"}, [FailReason.ANSWER_NOT_IN_GOLD]),  # answer nowhere
        ({"answer": "Andrzej", "aliases": ("Polish-Russian War",)}, []),  # an alias suffices
        ({"answer": "Polish-Russian"}, []),  # a hyphen is a word boundary
        ({"answer": "Russian Wars"}, [FailReason.ANSWER_NOT_IN_GOLD]),  # whole words only
        ({"answer": "film"}, [FailReason.ANSWER_IN_CLUES]),  # the clues give the answer away
        ({"question": "Was Polish-Russian War a film?"}, [FailReason.ANSWER_IN_CLUES]),
        ({"clues": [], "extraction": {}}, [FailReason.NO_CLUES, FailReason.NO_QUOTES]),
    ],
)
def test_verify_failure_modes(kwargs: dict, expected: list[FailReason]) -> None:
    assert sorted(set(_verify(**kwargs))) == sorted(expected)


def test_verify_reports_every_failure_not_just_the_first() -> None:
    bad = {"a": [QuoteEvidence(quote="not there", clue_indices=[0])], "b": []}
    codes = _verify(extraction=bad, answer="nobody")
    assert set(codes) == {
        FailReason.QUOTE_NOT_FOUND,
        FailReason.NO_QUOTES,
        FailReason.CLUE_UNSUPPORTED,
        FailReason.ANSWER_NOT_IN_GOLD,
    }
    assert codes.count(FailReason.CLUE_UNSUPPORTED) == 2
