"""grep_corpus: hostile patterns are bounded, and the literal prefilter never changes results."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex import _regex

from sleuth.index import grepindex
from sleuth.index.grepindex import GrepIndex, fold, fold_table
from sleuth.index.lexical import ChunkRow, LexicalIndex
from sleuth.tools.grep import Grep, GrepError, grep
from sleuth.tools.toolbox import Toolbox

# cased letters whose case classes are not ASCII-only, digits, space, punctuation, a mark
ALPHABET = "aAbBkK\u212asS\u017f\u00df\u1e9e\u03c3\u03c2\u03a3\u0130i\u00e9\u0301 0 1.-_\n"


def _lexical(texts: list[str]) -> LexicalIndex:
    """Rows + grep postings, without BM25 (grep never reads it)."""
    rows = [ChunkRow(f"d{i}_0", f"d{i}", 0, t, 1) for i, t in enumerate(texts)]
    return LexicalIndex(rows=rows, stamp={}, grep_index=GrepIndex.build(texts))


class CountingRows(list):
    """Chunk rows that count how many are looked at, by index or by iteration."""

    touched = 0

    def __getitem__(self, i):
        CountingRows.touched += 1
        return super().__getitem__(i)

    def __iter__(self):
        for row in super().__iter__():
            CountingRows.touched += 1
            yield row


# -- cost follows the matches --------------------------------------------------
def _toolbox_over(texts: list[str]) -> tuple[Toolbox, LexicalIndex]:
    lex = _lexical(texts)
    lex.rows = CountingRows(lex.rows)
    return Toolbox(SimpleNamespace(lexical=lex)), lex


@pytest.fixture(scope="module")
def big():
    filler = [
        f"row {i} talks about weather number {i % 97} and more words here" for i in range(40_000)
    ]
    filler[39_990] = "the Zanzibar treaty was signed"
    filler[39_995] = "a second zanzibarian mention"
    return _toolbox_over(filler)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("Qwertyuiop", []),  # absent: no chunk is searched
        (r"(?i)zanzibar", ["d39990_0", "d39995_0"]),  # case-insensitive, inside a longer word
        (r"signed|mention", ["d39990_0", "d39995_0"]),
        (r"\bZanzibar treaty\b", ["d39990_0"]),
    ],
)
def test_grep_touches_only_candidate_chunks(big, pattern, expected):
    tb, lex = big
    CountingRows.touched = 0
    result = tb.grep_corpus(pattern)
    assert result.error is None and [h.id for h in result.chunks] == expected
    assert CountingRows.touched <= 2 * len(expected) + 2, "grep scanned the corpus"


def test_pattern_without_literal_still_scans(big):
    tb, _ = big
    result = tb.grep_corpus(r"\d{5}")
    assert [h.id for h in result.chunks] == [
        "d10000_0",
        "d10001_0",
        "d10002_0",
        "d10003_0",
        "d10004_0",
    ]


# -- exact semantics: prefiltered == brute force -----------------------------------------
_atom = st.one_of(
    st.sampled_from(ALPHABET).map(re.escape),
    st.lists(st.sampled_from("aAkKsSσ1"), min_size=1, max_size=3).map(lambda c: f"[{''.join(c)}]"),
    st.sampled_from([".", r"\w", r"\d", r"\s", r"\b", r"[^a ]", "^", "$"]),
    st.text(alphabet="abkKsS ", min_size=2, max_size=6).map(re.escape),
)


def _compound(inner):
    return st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        inner.map(lambda p: f"({p})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "+?", "*+"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"
        ),
    )


patterns = st.tuples(
    st.sampled_from(["", "(?i)"]), st.recursive(_atom, _compound, max_leaves=8)
).map("".join)
texts = st.lists(st.text(alphabet=ALPHABET, max_size=30), min_size=1, max_size=12)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(corpus=texts, pattern=patterns)
def test_prefiltered_grep_equals_brute_force(monkeypatch, corpus, pattern):
    monkeypatch.setattr(grepindex, "MAX_ROW_SHARE", 2.0)  # always narrow, even small corpora
    lex = _lexical(corpus)
    try:
        expected = [r.id for r in lex.rows if regex.search(pattern, r.text)]
    except regex.error:
        return
    g = Grep.compile(pattern)
    assert [r.id for r in lex.rows if g.compiled.search(r.text)] == expected
    narrowed = g.candidates(lex)
    if narrowed is not None:
        assert {f"d{i}_0" for i in narrowed.tolist()} >= set(expected)
    assert [r.id for r in grep(lex, pattern, max_matches=100, timeout_s=30)] == expected


def test_fold_table_matches_the_engine_case_classes():
    table = fold_table()
    flags = regex.IGNORECASE | regex.UNICODE
    for c in range(sys.maxunicode + 1):
        cases = _regex.get_all_cases(flags, c)
        reps = {table.get(x, x) for x in cases}
        assert len(reps) == 1, f"U+{c:04X} has cases {cases} folding apart: {reps}"
    assert fold("Straße KELVIN \u212a \u017f", table) == "straße kelvin k s"


def test_grep_index_round_trips_and_rejects_another_engine_version(tmp_path):
    texts = ["Alpha beta", "gamma Delta", "beta again", "lone \ud800 surrogate", *["filler"] * 5]
    gi = GrepIndex.build(texts)
    gi.save(tmp_path / "g")
    loaded = GrepIndex.load(tmp_path / "g")
    assert loaded.literal_rows("BETA").tolist() == [0, 2]
    assert loaded.literal_rows("elt").tolist() == [1]  # inside a word, through trigrams
    assert loaded.literal_rows("rrog").tolist() == [3]
    assert loaded.literal_rows("xyz").tolist() == []
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    (tmp_path / "g" / "meta.json").write_text(json.dumps({**meta, "regex": "0.0"}))
    assert GrepIndex.load(tmp_path / "g") is None


# -- hostile patterns --------------------------------------------------------------
def test_exponential_repeat_is_refused_fast_without_memory():
    """Run in a child with an address-space cap: before the fix it compiled to ~20 GB."""
    code = textwrap.dedent(
        """
        import resource, time
        from types import SimpleNamespace
        from sleuth.index.lexical import ChunkRow, LexicalIndex
        from sleuth.tools.toolbox import Toolbox
        rows = [ChunkRow("a_0", "a", 0, "aaaa", 1)]
        tb = Toolbox(SimpleNamespace(lexical=LexicalIndex(rows=rows, stamp={})))
        pages = int(open("/proc/self/statm").read().split()[0])
        cap = pages * resource.getpagesize() + (1 << 30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        t0 = time.perf_counter()
        result = tb.grep_corpus("(((a{1000}){1000}){1000})")
        print(round(time.perf_counter() - t0, 4), result.error)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    seconds, error = proc.stdout.strip().split(" ", 1)
    assert "too large" in error and float(seconds) < 0.1


@pytest.mark.parametrize(
    "pattern", [r"x{9999}", r"[\w\W]{9999}", r"(?:(?:x{2000}){4})", r"(?i)(?:[a-z]{50}){190}"]
)
def test_the_largest_allowed_patterns_compile_within_100ms_of_cpu(pattern):
    c0 = time.thread_time()
    g = Grep.compile(pattern)
    assert time.thread_time() - c0 < 0.1
    assert g.compiled.search("y" + "x" * 10_000)  # and it still matches what it should


def test_catastrophic_backtracking_is_answered_within_100ms_of_cpu():
    tb = Toolbox(SimpleNamespace(lexical=_lexical(["a" * 40 + "!"])))
    t0, c0 = time.perf_counter(), time.thread_time()
    result = tb.grep_corpus(r"(a|aa)+$")
    cpu, wall = time.thread_time() - c0, time.perf_counter() - t0
    assert result.error and "catastrophic backtracking" in result.error
    assert cpu < 0.1 and wall < 1.0


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(unclosed", "invalid regular expression"),
        ("[[:alpha:]]", "invalid regular expression"),  # re and regex read it differently
        ("a" * 2001, "longer than 2000"),
        ("x{99999999999}", "invalid regular expression"),
        ("(" * 900 + ")" * 900, "invalid regular expression"),
        ("(?:(?:x{200}){200})", "too large"),
    ],
)
def test_bad_patterns_are_one_line_errors(pattern, message):
    with pytest.raises(GrepError, match=re.escape(message)) as e:
        grep(_lexical(["x"]), pattern)
    assert "\n" not in str(e.value)


def test_regex_only_syntax_means_what_re_means():
    """``{e<=1}`` is a fuzzy match to the regex module but literal text to ``re``."""
    lex = _lexical(["ab", "a{e<=1}"])
    assert [r.id for r in grep(lex, "a{e<=1}")] == ["d1_0"]
    assert [r.id for r in grep(lex, "(?x) a b  # verbose")] == ["d0_0"]
