"""A scripted multi-step search agent: what a careful non-learned policy can do in four turns.

1. Decompose the question into the full question, its capitalised spans (names, titles) and its
   clauses, and search for each in parallel.
2. Read the best document (first by RRF over those searches) and prune chunks whose words
   barely overlap the question, keeping the best few documents whatever their overlap.
3. Bridge hop: search for the names that the kept chunks mention but the question does not,
   each with the question words the best document left unexplained.
4. Answer with the documents ranked by RRF over every search as the view now shows them, the
   search for the whole question weighted up (``question_weight``).

The agent is a pure function of the transcript (see :mod:`sleuth.eval.transcript`), so a run is
deterministic given the corpus. Words are compared lower-cased and cut to ``_STEM`` characters, a
crude stemmer that lets "founded" meet "founder" without a stemming dependency.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sleuth.corpus.models import doc_id_of
from sleuth.eval.transcript import Observation, final_answer, query_of
from sleuth.eval.transcript import observations as read_observations
from sleuth.harness.schemas import PRUNE_CHUNKS, READ_DOCUMENT, SEARCH_CORPUS
from sleuth.policies.scripted import Reply, call, turn
from sleuth.tools.rrf import rrf

_STEM = 6
_WORD = re.compile(r"\w[\w'’&-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_QUOTED = re.compile(r"[\"“”]([^\"“”]{3,})[\"“”]")
_CLAUSE_BREAK = re.compile(
    r"[,;:?()\"“”]|\.\s|\b(?:and|or|but|who|whom|whose|which|that|where|when|while|whereas)\b",
    re.IGNORECASE,
)
_STOPWORDS = frozenset(  # a short English list plus words every question uses
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom whose why will with would you your yours first second one two name named known called
    many much year years""".split()  # noqa: SIM905 - a word list reads better as text
)
# Capitalised words that name no entity worth a bridge search.
_CALENDAR = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()  # noqa: SIM905
)
# Lower-case words that may sit inside a name ("Bank of England", "First for Women").
_CONNECTORS = frozenset({"of", "the", "for", "de", "del", "la", "le", "von", "van", "der", "da"})


@dataclass
class HeuristicAgent:
    """The script (call it as ``agent(messages, turn_index)``); fields are its few knobs."""

    max_queries: int = 4
    """Searches in the first turn (the full question first)."""
    prune_below: float = 0.2
    """Prune a chunk when fewer than this share of the question's words occur in it."""
    protected_docs: int = 2
    """The best documents after the first searches are never pruned."""
    bridge_entities: int = 3
    """Searches in the bridge hop, one per new name."""
    final_docs: int = 10
    """Length of the final list."""
    question_weight: float = 3.0
    """RRF weight of the search for the whole question. Searches run in parallel are
    deduplicated in call order, so the later ones rank only what the first left unseen and
    their top hits are weaker evidence than the question's own."""

    def __call__(self, messages: list[dict[str, Any]], index: int) -> Reply:
        question = query_of(messages)
        seen = read_observations(messages)
        if index == 0:
            queries = decompose(question, self.max_queries)
            return turn(*(call(SEARCH_CORPUS, query=q) for q in queries))
        ranked = rank_documents(seen, question, self.question_weight)
        if index == 1 and ranked:
            return self._read_and_prune(question, seen, ranked)
        if index == 2:
            bridges = self._bridge_queries(question, seen, ranked)
            if bridges:
                return turn(*(call(SEARCH_CORPUS, query=q) for q in bridges))
        return self._answer(ranked, seen)

    def _read_and_prune(self, question: str, seen: list[Observation], ranked: list[str]) -> Reply:
        wanted = stems(question)
        protected = set(ranked[: self.protected_docs])
        weak = [
            c.id
            for o in seen
            for c in o.chunks
            if doc_id_of(c.id) not in protected and overlap(wanted, c.text) < self.prune_below
        ]
        calls = [call(READ_DOCUMENT, doc_id=ranked[0])]
        if weak:
            calls.append(call(PRUNE_CHUNKS, chunk_ids=list(dict.fromkeys(weak))))
        return turn(*calls)

    def _bridge_queries(
        self, question: str, seen: list[Observation], ranked: list[str]
    ) -> list[str]:
        """New names in the kept chunks, each searched with what the best document lacks."""
        if not ranked:
            return []
        weight = {doc: 1.0 / rank for rank, doc in enumerate(ranked, start=1)}
        asked = stems(question)
        scores: Counter[str] = Counter()
        for chunk in {c.id: c for o in seen for c in o.chunks}.values():
            for name in capitalised_spans(chunk.text):
                if not stems(name) <= asked and name.lower() not in _CALENDAR:
                    scores[name] += weight.get(doc_id_of(chunk.id), 0.0)
        names = [name for name, score in scores.most_common(self.bridge_entities) if score > 0]
        best_text = " ".join(c.text for o in seen for c in o.chunks if doc_id_of(c.id) == ranked[0])
        known = stems(best_text)
        missing = [w for w in content_words(question) if w[:_STEM] not in known]
        tail = " ".join(missing or content_words(question))
        return [f"{name} {tail}".strip() for name in names]

    def _answer(self, ranked: list[str], seen: list[Observation]) -> Reply:
        searches = sum(o.tool == SEARCH_CORPUS for o in seen)
        why = f"ranked {{}} by reciprocal rank fusion over {searches} searches"
        top = ranked[: self.final_docs]
        return final_answer([(doc, why.format(rank)) for rank, doc in enumerate(top, start=1)])


def rank_documents(seen: list[Observation], question: str, question_weight: float) -> list[str]:
    """Documents ranked by weighted RRF (k = 60) over the search results the view still shows."""
    searches = [o for o in seen if o.tool == SEARCH_CORPUS]
    rankings = [list(dict.fromkeys(doc_id_of(c.id) for c in o.chunks)) for o in searches]
    weights = [question_weight if o.arguments.get("query") == question else 1.0 for o in searches]
    return [doc for doc, _ in rrf(rankings, weights=weights)]


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning (no stopwords, no one- or two-letter words)."""
    words = (w.lower() for w in _WORD.findall(text))
    return list(dict.fromkeys(w for w in words if len(w) > 2 and w not in _STOPWORDS))


def stems(text: str) -> set[str]:
    return {w[:_STEM] for w in content_words(text)}


def overlap(wanted: set[str], text: str) -> float:
    """Share of the question's stems that occur in ``text`` (1.0 when the question has none)."""
    return len(wanted & stems(text)) / len(wanted) if wanted else 1.0


def capitalised_spans(text: str) -> list[str]:
    """Runs of capitalised words (names, titles), allowing ``_CONNECTORS`` and numbers inside.

    A sentence's first word counts only when it is not a stopword ("Which", "The").
    """
    spans: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        current: list[str] = []
        pending: list[str] = []
        for i, word in enumerate(_WORD.findall(sentence)):
            lower = word.lower()
            if word[0].isupper() and not (i == 0 and lower in _STOPWORDS):
                current += [*pending, word]
                pending = []
            elif current and not pending and word[0].isdigit():
                current.append(word)
            elif current and lower in _CONNECTORS:
                pending.append(word)
            else:
                _flush(current, spans)
                current, pending = [], []
        _flush(current, spans)
    return list(dict.fromkeys(spans))


def _flush(words: list[str], spans: list[str]) -> None:
    span = " ".join(words)
    if len(span) > 2 and span.lower() not in _STOPWORDS:
        spans.append(span)


def decompose(question: str, max_queries: int) -> list[str]:
    """Search queries for a question, most specific first, deduplicated.

    Order: the question itself, quoted titles, multi-word names, clauses that add a sub-question
    (two content words or more, not the whole question again), then single-word names.
    """
    words = set(content_words(question))
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(question) if c and c.strip()]
    useful = [c for c in clauses if len(content_words(c)) >= 2 and set(content_words(c)) != words]
    names = capitalised_spans(question)
    ordered = [
        question.strip(),
        *_QUOTED.findall(question),
        *(n for n in names if " " in n),
        *useful,
        *(n for n in names if " " not in n),
    ]
    queries: dict[str, str] = {}  # lower-cased -> first spelling
    for candidate in ordered:
        queries.setdefault(candidate.lower(), candidate)
    return list(queries.values())[:max_queries]
