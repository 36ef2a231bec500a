"""``grep_corpus``: a policy's regular expression, made safe and narrowed before it runs.

A pattern is parsed once with Python's ``re`` parser (so its syntax is Python's), and that
one parse tree drives everything:

* **bounds**: the pattern's size with every counted repeat expanded is capped before any
  engine compiles it (``(((a{1000}){1000}){1000})`` would otherwise grow the process by
  tens of gigabytes);
* **matching**: the tree is written back out in a canonical form (every literal escaped)
  and compiled by the ``regex`` engine, which supports a time limit; the engine therefore
  reads the same pattern that was analysed (``a{e<=1}`` stays a literal, not a fuzzy match);
* **narrowing**: literal strings every match must contain are read off the tree, and the
  lexical index's word-piece postings (:mod:`sleuth.index.grepindex`) give the rows that can
  hold them; only those rows are searched. Patterns with no literal are scanned in full.

Each chunk search has its own short time limit, so catastrophic backtracking is answered in
about ``chunk_timeout_s`` rather than after the whole budget.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from re import _constants as C  # type: ignore[attr-defined]  # noqa: N812
from re import _parser  # type: ignore[attr-defined]
from typing import Any, TypeGuard

import numpy as np
import regex

from sleuth.errors import ToolError
from sleuth.index.lexical import ChunkRow, LexicalIndex

MAX_PATTERN_CHARS = 2000
MAX_EXPANDED_SIZE = 10_000  # pattern items with counted repeats multiplied out
MAX_EXACT = 64  # alternatives tracked when multiplying out literal sets
_FLAG_LETTERS = {
    C.SRE_FLAG_IGNORECASE: "i",
    C.SRE_FLAG_MULTILINE: "m",
    C.SRE_FLAG_DOTALL: "s",
    C.SRE_FLAG_ASCII: "a",
}
_AT = {
    C.AT_BEGINNING: "^",
    C.AT_BEGINNING_STRING: r"\A",
    C.AT_END: "$",
    C.AT_END_STRING: r"\Z",
    C.AT_BOUNDARY: r"\b",
    C.AT_NON_BOUNDARY: r"\B",
}
_CATEGORY = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
_ONE_CHAR = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)


Node = tuple[Any, Any]
"""One item of ``re``'s parse tree: (opcode, argument); typeshed does not type ``re._parser``."""


class GrepError(ToolError):
    """A pattern that cannot be run; the message is what the policy sees."""


# -- parse and bound ---------------------------------------------------------------------
def parse(pattern: str) -> Any:
    """``re`` syntax; warnings (a possible nested set) are errors, as the engines disagree."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise GrepError(f"pattern is longer than {MAX_PATTERN_CHARS} characters; shorten it")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return _parser.parse(pattern)
    except (_parser.error, FutureWarning, DeprecationWarning, ValueError, OverflowError) as e:
        raise GrepError(f"invalid regular expression: {e}") from None
    except RecursionError:
        raise GrepError("invalid regular expression: nested too deeply") from None


def _count(lo: int, hi: int) -> int:
    return max(1, lo if hi == C.MAXREPEAT else hi)


def expanded_size(items: Iterable[Node]) -> int:
    """Items with every counted repeat multiplied out: what an engine may have to build."""
    total = 0
    for op, av in items:
        if op in _REPEATS:
            total += _count(av[0], av[1]) * expanded_size(av[2])
        elif op == C.BRANCH:
            total += 1 + sum(expanded_size(alt) for alt in av[1])
        elif op == C.SUBPATTERN:
            total += 1 + expanded_size(av[3])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            total += 1 + expanded_size(av[1])
        elif op == C.ATOMIC_GROUP:
            total += 1 + expanded_size(av)
        elif op == C.GROUPREF_EXISTS:
            total += 1 + sum(expanded_size(x) for x in av[1:] if x is not None)
        else:
            total += 1
        if total > MAX_EXPANDED_SIZE:
            break
    return total


# -- canonical form for the regex engine --------------------------------------------------
def _char(cp: int) -> str:
    """ASCII letters and digits as themselves (never special), anything else escaped."""
    c = chr(cp)
    return c if c.isascii() and c.isalnum() else f"\\U{cp:08x}"


def _flags(bits: int) -> str:
    return "".join(letter for bit, letter in _FLAG_LETTERS.items() if bits & bit)


def _set(items: list[Node]) -> str:
    out = []
    for op, av in items:
        if op == C.NEGATE:
            out.append("^")
        elif op == C.LITERAL:
            out.append(_char(av))
        elif op == C.RANGE:
            out.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op == C.CATEGORY:
            out.append(_CATEGORY[av])
        else:
            raise GrepError(f"unsupported set item {op}")
    return "[" + "".join(out) + "]"


def _repeat(op: Any, lo: int, hi: int, body: list[Node]) -> str:
    """A single character item is repeated bare: the engine compiles a group repeat slowly."""
    count = f"{{{lo},}}" if hi == C.MAXREPEAT else f"{{{lo},{hi}}}"
    suffix = {C.MAX_REPEAT: "", C.MIN_REPEAT: "?", C.POSSESSIVE_REPEAT: "+"}[op]
    text = unparse(body)
    if not (len(body) == 1 and body[0][0] in _ONE_CHAR):
        text = f"(?:{text})"
    return f"{text}{count}{suffix}"


def unparse(items: Iterable[Node]) -> str:
    """Write a parse tree back out so that ``regex`` reads exactly what ``re`` parsed."""
    out = []
    for op, av in items:
        if op == C.LITERAL:
            out.append(_char(av))
        elif op == C.NOT_LITERAL:
            out.append(f"[^{_char(av)}]")
        elif op == C.ANY:
            out.append(".")
        elif op == C.IN:
            out.append(_set(av))
        elif op == C.AT:
            out.append(_AT[av])
        elif op in _REPEATS:
            out.append(_repeat(op, *av))
        elif op == C.BRANCH:
            out.append("(?:" + "|".join(unparse(alt) for alt in av[1]) + ")")
        elif op == C.SUBPATTERN:
            group, add, remove, body = av
            inner, on, off = unparse(body), _flags(add), _flags(remove)
            if on or off:
                inner = f"(?{on}{'-' + off if off else ''}:{inner})"
            out.append(f"({inner})" if group else f"(?:{inner})")
        elif op in (C.ASSERT, C.ASSERT_NOT):
            direction, body = av
            kind = (
                ("=" if op == C.ASSERT else "!")
                if direction == 1
                else ("<=" if op == C.ASSERT else "<!")
            )
            out.append(f"(?{kind}{unparse(body)})")
        elif op == C.ATOMIC_GROUP:
            out.append(f"(?>{unparse(av)})")
        elif op == C.GROUPREF:
            out.append(f"(?:\\{av})")
        elif op == C.GROUPREF_EXISTS:
            group, yes, no = av
            out.append(f"(?({group}){unparse(yes)}|{unparse(no) if no is not None else ''})")
        else:
            raise GrepError(f"unsupported pattern element {op}")
    return "".join(out)


# -- literals every match contains -----------------------------------------------------
# A node's facts: ``exact`` (every string it can match, when few and known) and ``required``
# (clauses, all of which hold: each is a set of strings, one of which occurs in the match).
Facts = tuple[frozenset[str] | None, list[frozenset[str]]]
_UNKNOWN: Facts = (None, [])
_EMPTY: Facts = (frozenset({""}), [])


def _useful(clause: frozenset[str] | None) -> TypeGuard[frozenset[str]]:
    return clause is not None and bool(clause) and "" not in clause


def _sequence(items: Iterable[Node]) -> Facts:
    """Adjacent exact parts multiply out; anything unknown closes the current run."""
    required: list[frozenset[str]] = []
    run: frozenset[str] | None = frozenset({""})
    whole = True
    for item in items:
        exact, req = facts(item)
        required += req
        if exact is not None and run is not None and len(run) * len(exact) <= MAX_EXACT:
            run = frozenset(a + b for a in run for b in exact)
            continue
        whole = False
        if _useful(run):
            required.append(run)
        run = exact if exact is not None else frozenset({""})
    if whole:
        return run, required
    if _useful(run):
        required.append(run)
    return None, required


def _best(f: Facts) -> frozenset[str] | None:
    """One clause that stands for a node: its exact set, else its most specific clause."""
    exact, required = f
    if exact is not None:
        return exact if _useful(exact) else None
    useful = [c for c in required if _useful(c)]
    return max(useful, key=lambda c: (min(map(len, c)), -len(c)), default=None)


def _branch(alternatives: list[list[Node]]) -> Facts:
    parts = [_sequence(alt) for alt in alternatives]
    exacts = [e for e, _ in parts if e is not None]
    if len(exacts) == len(parts):
        union = frozenset[str]().union(*exacts)
        if len(union) <= MAX_EXACT:
            return union, []
    clauses = [c for p in parts if (c := _best(p)) is not None]
    if len(clauses) < len(parts):
        return _UNKNOWN
    return None, [frozenset[str]().union(*clauses)]


def _set_exact(items: list[Node]) -> frozenset[str] | None:
    chars: set[str] = set()
    for op, av in items:
        if op == C.LITERAL:
            chars.add(chr(av))
        elif op == C.RANGE and av[1] - av[0] < 8:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:
            return None
    return frozenset(chars) if len(chars) <= 8 else None


def _repeated(lo: int, hi: int, body: list[Node]) -> Facts:
    if lo == 0:
        return _EMPTY if hi == 0 else _UNKNOWN
    exact, required = _sequence(body)
    if exact is not None and lo == hi and lo <= 8 and len(exact) ** lo <= MAX_EXACT:
        out = frozenset({""})
        for _ in range(lo):
            out = frozenset(a + b for a in out for b in exact)
        return out, required
    return None, required + ([exact] if _useful(exact) else [])


def facts(item: Node) -> Facts:
    op, av = item
    if op == C.LITERAL:
        return frozenset({chr(av)}), []
    if op == C.IN:
        return _set_exact(av), []
    if op == C.SUBPATTERN:
        return _sequence(av[3])
    if op == C.ATOMIC_GROUP:
        return _sequence(av)
    if op == C.BRANCH:
        return _branch(av[1])
    if op in _REPEATS:
        return _repeated(*av)
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return _EMPTY  # zero width: consumes nothing
    return _UNKNOWN


def required_clauses(tree: Iterable[Node]) -> list[frozenset[str]]:
    """Clauses (sets of literals, one of which every match contains) for the whole pattern."""
    exact, required = _sequence(tree)
    return [c for c in [*required, exact] if _useful(c)]


# -- running it --------------------------------------------------------------------------
@dataclass
class Grep:
    """A checked pattern: the compiled engine pattern and the literals that narrow it."""

    compiled: regex.Pattern
    clauses: list[frozenset[str]]

    @classmethod
    def compile(cls, pattern: str) -> Grep:
        if not isinstance(pattern, str) or not pattern:
            raise GrepError("pattern must be a non-empty string")
        tree = parse(pattern)
        if expanded_size(tree) > MAX_EXPANDED_SIZE:
            raise GrepError(
                f"pattern is too large once its repeats are expanded (over {MAX_EXPANDED_SIZE} "
                "items); use smaller counts"
            )
        prefix = _flags(tree.state.flags)
        source = (f"(?{prefix})" if prefix else "") + unparse(tree)
        try:
            compiled = regex.compile(source, flags=regex.VERSION0)
        except (regex.error, ValueError, OverflowError) as e:
            raise GrepError(f"invalid regular expression: {e}") from None
        return cls(compiled, required_clauses(tree))

    def candidates(self, lexical: LexicalIndex) -> np.ndarray | None:
        """Ascending rows that may match; ``None`` when the literals narrow nothing."""
        best: np.ndarray | None = None
        for clause in self.clauses:
            found = [lexical.grep.literal_rows(s) for s in clause]
            parts = [p for p in found if p is not None]
            if len(parts) < len(found):
                continue
            rows = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
            best = rows if best is None else np.intersect1d(best, rows, assume_unique=True)
            if not len(best):
                break
        return best


def grep(
    lexical: LexicalIndex,
    pattern: str,
    exclude: Collection[str] = (),
    max_matches: int = 5,
    timeout_s: float = 0.5,
    chunk_timeout_s: float = 0.05,
    allowed: np.ndarray | None = None,
) -> list[ChunkRow]:
    """The first ``max_matches`` chunks (corpus order) whose text the pattern matches, among the
    rows ``allowed`` (a boolean mask over rows: a ``where`` filter's) when given.

    Raises :class:`GrepError` for a bad, oversized or runaway pattern."""
    g = Grep.compile(pattern)
    deadline = time.perf_counter() + timeout_s
    texts, narrowed = lexical.texts, g.candidates(lexical)
    order = range(len(texts)) if narrowed is None else narrowed.tolist()
    excluded = frozenset(lexical.rows_for(exclude).tolist())
    found: list[ChunkRow] = []
    for i in order:
        if i in excluded or (allowed is not None and not allowed[i]):
            continue
        remaining = deadline - time.perf_counter()
        try:
            if remaining <= 0:
                raise TimeoutError
            hit = g.compiled.search(texts[i], timeout=min(chunk_timeout_s, remaining))
        except TimeoutError:
            raise GrepError(_too_slow(timeout_s, chunk_timeout_s, remaining)) from None
        if hit:
            found.append(lexical.rows[i])
            if len(found) >= max_matches:
                break
    return found


def _too_slow(timeout_s: float, chunk_timeout_s: float, remaining: float) -> str:
    if remaining <= chunk_timeout_s:
        return f"grep took longer than {timeout_s:g}s; use a more specific pattern"
    return (
        f"pattern took longer than {chunk_timeout_s * 1000:.0f} ms on one chunk "
        "(catastrophic backtracking?); simplify it"
    )
