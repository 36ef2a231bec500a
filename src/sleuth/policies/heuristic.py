"""A scripted multi-hop search agent: what a careful non-LLM policy can do with learned selection.

1. Decompose the question into the full question, its capitalised spans (names, titles) and its
   clauses, and search for each in parallel.
2. Hop: order every document seen so far (the learned selector when one is given, else RRF over
   the searches) and search for the names the best documents mention that no search has asked
   for and no seen document is titled, names that title an unseen corpus document first — each
   with the question words the best document leaves unexplained (fewer names after the first
   round). Repeat while a hop brings new names, up to ``max_hops``, until a later round brings
   nothing new into the top five, and while the token budget leaves room for another round of
   results, pruning the weakest chunks only when that room needs it (a chunk pruned is a
   document the final list can no longer rank) and only for a round with a name that titles an
   unseen document.
3. Answer with the documents in the selector's order (with a text stage: its first ten
   reordered by the selector's and the cross-encoder's scores together,
   :mod:`sleuth.ranking.textstage`), the whole-question search's top hit kept in the top two
   unless the selector clearly prefers the document it would displace, less so a sibling of a
   better document (a season page under its club)
   (:func:`sleuth.ranking.selector.keep_search_head`).

The agent reads only the transcript (see :mod:`sleuth.policies.transcript`); the selector looks up
titles and question evidence in the index the tools search. A run is deterministic given the
corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sleuth.corpus.models import doc_id_of
from sleuth.index.graphnodes import CALENDAR
from sleuth.policies.filters import has_filter_cue, question_filter
from sleuth.policies.scripted import Reply, call, turn
from sleuth.policies.transcript import ToolReply, final_answer, query_of, token_usage
from sleuth.policies.transcript import observations as read_observations
from sleuth.ranking.features import Search, SeenDoc
from sleuth.ranking.selector import SEARCH_MARGIN, Selector, keep_search_head
from sleuth.ranking.text import (
    STEM,
    capitalised_spans,
    content_words,
    evidence_sentence,
    overlap,
    stems,
)
from sleuth.ranking.textstage import TextStage, passage_text
from sleuth.tools.rrf import rrf
from sleuth.tools.spec import DESCRIBE_CORPUS, PRUNE_CHUNKS, READ_DOCUMENT, SEARCH_CORPUS

_QUOTED = re.compile(r"[\"“”]([^\"“”]{3,})[\"“”]")
_CLAUSE_BREAK = re.compile(
    r"[,;:?()\"“”]|\.\s|\b(?:and|or|but|who|whom|whose|which|that|where|when|while|whereas)\b",
    re.IGNORECASE,
)
_RESULT_TOKENS = 1500  # a typical search result, to judge whether another hop fits
_HEADER_TOKENS = 12  # a chunk's "# DOCUMENT ID: ..." line, beyond its own tokens


@dataclass
class HeuristicAgent:
    """The script (call it as ``agent(messages, turn_index)``); fields are its knobs."""

    selector: Selector | None = None
    """Learned document selection; without it documents are ordered by weighted RRF and
    weak chunks are found by word overlap with the question."""
    max_queries: int = 4
    """Searches in the first turn (the full question first)."""
    max_hops: int = 3
    """Bridge rounds after the first searches (MuSiQue questions have up to 4 hops)."""
    bridge_entities: int = 3
    """Searches per bridge round, one per new name..."""
    later_bridges: int = 2
    """...and per round after the first: on pooled held-out questions the third names of rounds
    two and three (about 600 searches, a sixth of all) put a gold document first into the top
    five for one question of 356."""
    name_floor: float = 0.5
    """A name scoring under this share of its round's best is not searched (a mere mention
    beside a title of an unseen document: no gold from 164 such pooled searches)."""
    settled_after: int = 2
    """From this many bridge rounds on, a round that brought no new document into the top five
    is the last (the next would search names of the same documents again)."""
    expand_docs: int = 3
    """Names are taken from this many best documents (weighted 1/rank)..."""
    title_docs: int = 5
    """...and names that title an unseen corpus document (see :attr:`title_boost`) from this
    many (a corpus without such names, e.g. patent abstracts, runs no longer for it)."""
    title_boost: float = 3.0
    """A name that is the title of a corpus document the run has not seen counts this many
    times (1.0: every name alike, and names that title only seen documents are searched too)."""
    hub_share: float = 0.01
    """...unless more than this share of the corpus's documents names it: a hub ("United
    States", "Canada") is no more likely the next link than any other name."""
    keep_docs: int = 6
    """The best documents are never pruned."""
    prune_below: float = 0.05
    """Only chunks of documents the selector rates below this probability (the overlap share
    with the question when there is no selector) may be pruned, weakest first, as many as the
    next round's room needs."""
    final_docs: int = 10
    """Length of the final list."""
    question_weight: float = 3.0
    """RRF weight of the whole-question search when there is no selector."""
    quote_evidence: bool = True
    """Open each justification with the document's sentence closest to the question (off:
    say only how it was ranked, as short as a small model's reply cap needs)."""
    text_stage: TextStage | None = None
    """The learned cross-encoder that reorders the final list's head (opt-in: ``heuristic-text``);
    used only with a selector."""
    search_margin: float | None = SEARCH_MARGIN
    """With a selector: the whole-question search's first documents keep their places in the
    final list (``selector.search_floor``: its top hit in the top two; on a corpus that is not
    title-linked also its top five in the top five) unless the selector prefers the document they would
    displace by more than this many logits (None: the selector's order alone)."""
    use_filters: bool = True
    """When the question names a sender, a date or a document type and ``describe_corpus`` is
    offered: describe the corpus first and filter the first searches (:mod:`.filters`)."""

    def __call__(self, messages: list[dict[str, Any]], index: int) -> Reply:
        question = query_of(messages)
        replies = read_observations(messages)
        described = [o for o in replies if o.tool == DESCRIBE_CORPUS]
        seen = [o for o in replies if o.tool != DESCRIBE_CORPUS]
        if index == 0 and self._describe_first(messages, question):
            return turn(call(DESCRIBE_CORPUS))
        first = 1 if described else 0
        if index == first:
            return self._first_searches(question, described)
        ranked = self.rank(question, seen)
        hops_done = len({o.turn for o in seen if o.tool == SEARCH_CORPUS}) - 1
        if hops_done < self.max_hops and not self._settled(ranked, seen, hops_done):
            count = self.bridge_entities if hops_done == 0 else self.later_bridges
            weak = self._weak_chunks(question, seen, ranked, self._overflow(messages))
            bridges = (
                self._bridge_queries(question, seen, ranked, count, titled_only=bool(weak))
                if weak is not None
                else []
            )
            if bridges:
                calls = [call(SEARCH_CORPUS, query=q) for q in bridges]
                if weak:
                    calls.append(call(PRUNE_CHUNKS, chunk_ids=weak))
                if index == first + 1 and ranked and _has_more_chunks(ranked[0][0], seen):
                    calls.append(call(READ_DOCUMENT, doc_id=ranked[0][0]))
                return turn(*calls)
        return self.answer(question, ranked, seen)

    def _settled(self, ranked: list[tuple[str, float]], seen: list[ToolReply], hops: int) -> bool:
        """After :attr:`settled_after` bridge rounds: none of the top five documents was first
        shown by the latest round's searches."""
        if hops < self.settled_after:
            return False
        searches = [o for o in seen if o.tool == SEARCH_CORPUS]
        last = max(o.turn for o in searches)
        before = {doc_id_of(c.id) for o in seen if o.turn < last for c in o.chunks}
        return all(doc in before for doc, _ in ranked[:5])

    def _describe_first(self, messages: list[dict[str, Any]], question: str) -> bool:
        """Filters on, the tool offered (the system prompt names it) and a cue in the question."""
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        return self.use_filters and DESCRIBE_CORPUS in system and has_filter_cue(question)

    def _first_searches(self, question: str, described: list[ToolReply]) -> Reply:
        """The decomposed searches; filtered when the description gives an unambiguous filter,
        plus the whole question unfiltered (a wrong filter must not hide everything)."""
        queries = decompose(question, self.max_queries)
        text = described[0].chunks[0].text if described and described[0].chunks else ""
        where = question_filter(question, text) if text else None
        if where is None:
            return turn(*(call(SEARCH_CORPUS, query=q) for q in queries))
        calls = [call(SEARCH_CORPUS, query=q, where=where) for q in queries]
        return turn(*calls, call(SEARCH_CORPUS, query=question))

    # -- ordering ------------------------------------------------------------------------
    def rank(self, question: str, seen: list[ToolReply]) -> list[tuple[str, float]]:
        """Seen documents, best first, with a score (probability with a selector)."""
        if self.selector is None:
            return rank_by_rrf(seen, question, self.question_weight)
        docs, searches = trail(seen, self.selector.title)
        return self.selector.rank(question, docs, searches)

    def _overflow(self, messages: list[dict[str, Any]]) -> int:
        """Tokens the view must shed so that another full round of results fits under half the
        budget (the soft threshold); negative when it fits as it is. A smaller later round
        (:attr:`later_bridges`) keeps this gate: sized to its own results it ran rounds a full
        one would not, more turns for the selector to rank (slower, patents +5% searches)."""
        usage = token_usage(messages)
        if usage is None:
            return -1
        used, total = usage
        return used + self.bridge_entities * _RESULT_TOKENS - total // 2

    def _weak_chunks(
        self, question: str, seen: list[ToolReply], ranked: list[tuple[str, float]], need: int
    ) -> list[str] | None:
        """The weakest chunks whose tokens make room for the next round, weakest first; none
        while it fits, ``None`` when pruning every weak chunk would still not make room.

        A chunk is weak when its document is outside the best :attr:`keep_docs` and rated below
        :attr:`prune_below`. Only what the budget needs goes: a document that looks weak before
        its chain's bridge is found is often gold once it is (pruned, it could not be ranked)."""
        if need < 0:
            return []
        protected = {doc for doc, _ in ranked[: self.keep_docs]}
        score = dict(ranked)
        wanted = stems(question)
        weak: list[tuple[float, int, str, int]] = []
        for order, c in enumerate({c.id: c for o in seen for c in o.chunks}.values()):
            doc = doc_id_of(c.id)
            value = score.get(doc, 0.0) if self.selector else overlap(wanted, c.text)
            if doc not in protected and value < self.prune_below:
                weak.append((value, order, c.id, c.tokens + _HEADER_TOKENS))
        pruned, freed = [], 0
        for _, _, chunk_id, tokens in sorted(weak):
            if freed > need:
                break
            pruned.append(chunk_id)
            freed += tokens
        return pruned if freed > need else None

    def _bridge_queries(
        self,
        question: str,
        seen: list[ToolReply],
        ranked: list[tuple[str, float]],
        count: int,
        titled_only: bool = False,
    ) -> list[str]:
        """The ``count`` best new names in the best documents (none under :attr:`name_floor` of
        the best), each searched with what the best document lacks."""
        if not ranked:
            return []
        scores = self._bridge_names(question, seen, ranked, titled_only)
        names = best_names(scores, count)
        names = [n for n in names if scores[n] >= self.name_floor * scores[names[0]]]
        best_text = " ".join(
            c.text for o in seen for c in o.chunks if doc_id_of(c.id) == ranked[0][0]
        )
        known = stems(best_text)
        missing = [w for w in content_words(question) if w[:STEM] not in known]
        tail = " ".join(missing or content_words(question))
        return [f"{name} {tail}".strip() for name in names]

    def _bridge_names(
        self,
        question: str,
        seen: list[ToolReply],
        ranked: list[tuple[str, float]],
        titled_only: bool = False,
    ) -> dict[str, float]:
        """New names of the best documents with their scores: each scores its
        document's weight (1/rank) for every chunk it is in, times :attr:`title_boost` when it
        is the title of a corpus document the run has not seen (the next link, found by name;
        only such names come from the documents ranked after :attr:`expand_docs`).
        A name that titles only seen documents, or that a search or the question already
        asked, is no bridge. ``titled_only`` (the round must prune to fit): with a corpus graph,
        no names unless one titles an unseen document; a round of mere mentions is not worth
        chunks the final list could rank (on e-mail and patents it cost searches for nothing)."""
        best = [doc for doc, _ in ranked[: max(self.expand_docs, self.title_docs)]]
        weight = {doc: 1.0 / rank for rank, doc in enumerate(best, start=1)}
        every_name = set(best[: self.expand_docs])
        asked = stems(question)
        searched = " \n ".join(
            str(o.arguments.get("query", "")).lower() for o in seen if o.tool == SEARCH_CORPUS
        )
        found_titles = self._seen_titles(seen)
        titled = self._unseen_title(seen)
        strict = titled_only and self.selector is not None and self.title_boost != 1.0
        any_title = False
        scores: dict[str, float] = {}
        for chunk in {c.id: c for o in seen for c in o.chunks}.values():
            doc = doc_id_of(chunk.id)
            if doc not in weight:
                continue
            for name in capitalised_spans(chunk.text):
                lower = name.lower()
                if (
                    stems(name) <= asked
                    or lower in CALENDAR
                    or lower in searched
                    or lower in found_titles
                ):
                    continue
                unseen = titled(name)
                if unseen is False or (not unseen and doc not in every_name):
                    continue
                any_title = any_title or bool(unseen)
                boost = self.title_boost if unseen else 1.0
                scores[name] = scores.get(name, 0.0) + weight[doc] * boost
        return {} if strict and not any_title else scores

    def _unseen_title(self, seen: list[ToolReply]) -> Callable[[str], bool | None]:
        """``name -> True`` when the name titles a corpus document the run has not seen and is
        no hub (:attr:`hub_share`), ``False`` when it titles only seen ones, ``None`` otherwise
        (also when no corpus graph is at hand: without a selector the agent knows no index)."""
        if self.selector is None or self.title_boost == 1.0:
            return lambda _: None
        graph = self.selector.index.graph
        docs = {doc_id_of(c.id) for o in seen for c in o.chunks}

        def unseen(name: str) -> bool | None:
            owners = graph.titled(name)
            if not owners:
                return None
            if all(d in docs for d in owners):
                return False
            return True if graph.share_naming(name) <= self.hub_share else None

        return unseen

    def _seen_titles(self, seen: list[ToolReply]) -> set[str]:
        """Lower-cased titles of seen documents: a name already found needs no search."""
        if self.selector is None:
            return set()
        docs = {doc_id_of(c.id) for o in seen for c in o.chunks}
        return {self.selector.title(d).lower() for d in docs} - {""}

    def _passage_of(self, seen: list[ToolReply]) -> Any:
        """A document's title and the text of the chunks the run saw, for the text stage."""
        texts: dict[str, list[str]] = {}
        for o in seen:
            for c in o.chunks:
                parts = texts.setdefault(doc_id_of(c.id), [])
                if c.text not in parts:
                    parts.append(c.text)
        title = self.selector.title if self.selector else (lambda _: "")
        return lambda doc: passage_text(title(doc), "\n".join(texts.get(doc, [])))

    def answer(self, question: str, ranked: list[tuple[str, float]], seen: list[ToolReply]) -> str:
        """The final reply: the best ``final_docs`` of ``ranked``, each justified by its sentence
        closest to the question (:attr:`quote_evidence`) and how it was ranked."""
        searches = sum(o.tool == SEARCH_CORPUS for o in seen)
        how = "learned selection" if self.selector else "reciprocal rank fusion"
        if self.text_stage is not None and self.selector is not None:
            ranked = self.text_stage.rerank(question, ranked, self._passage_of(seen))
            how = "learned selection and text stage"
        if self.selector is not None and self.search_margin is not None:
            hits = question_hits(question, seen)
            floor, title = self.selector.floor(), self.selector.title
            ranked = keep_search_head(ranked, hits, self.search_margin, floor, title)
        entries = []
        for rank, (doc, _) in enumerate(ranked[: self.final_docs], start=1):
            why = f"Ranked {rank} by {how} over {searches} searches."
            if self.quote_evidence:
                chunks = (c.text for o in seen for c in o.chunks if doc_id_of(c.id) == doc)
                text = "\n\n".join(dict.fromkeys(chunks))  # each chunk once, its own paragraph
                quote = evidence_sentence(question, text)
                why = f'"{quote}" {why}' if quote else why
            entries.append((doc, why))
        return final_answer(entries)


def best_names(scores: dict[str, float], count: int) -> list[str]:
    """The ``count`` highest-scoring names; ties keep their first-seen (text) order."""
    order = {name: i for i, name in enumerate(scores)}
    return sorted(scores, key=lambda n: (-scores[n], order[n]))[:count]


def trail(seen: list[ToolReply], title_of: Any) -> tuple[list[SeenDoc], list[Search]]:
    """The selector's view of a transcript: seen documents with their ranks, and the searches."""
    docs: dict[str, SeenDoc] = {}
    searches: list[Search] = []
    first_turn = min((o.turn for o in seen if o.tool == SEARCH_CORPUS), default=0)
    for o in seen:
        number = None
        if o.tool == SEARCH_CORPUS:
            number = len(searches)
            searches.append(Search(str(o.arguments.get("query", "")), o.turn - first_turn))
        order = list(dict.fromkeys(doc_id_of(c.id) for c in o.chunks))
        for c in o.chunks:
            doc = doc_id_of(c.id)
            entry = docs.get(doc)
            if entry is None:
                entry = docs[doc] = SeenDoc(doc, title_of(doc))
            if c.text not in entry.text:
                entry.text = f"{entry.text}\n{c.text}" if entry.text else c.text
        if number is not None:
            for rank, doc in enumerate(order, start=1):
                docs[doc].ranks.append((number, rank))
    return list(docs.values()), searches


def rank_by_rrf(
    seen: list[ToolReply], question: str, question_weight: float
) -> list[tuple[str, float]]:
    """Documents ranked by weighted RRF (k = 60) over the search results the view still shows."""
    searches = [o for o in seen if o.tool == SEARCH_CORPUS]
    rankings = [list(dict.fromkeys(doc_id_of(c.id) for c in o.chunks)) for o in searches]
    weights = [question_weight if o.arguments.get("query") == question else 1.0 for o in searches]
    return rrf(rankings, weights=weights)


def question_hits(question: str, seen: list[ToolReply]) -> list[str]:
    """The documents of the unfiltered search for the whole question, in its order, less any
    chunk pruned since (the agent's toolbox reranks it with the ranker's search head, so its top
    hit is not always single-pass's); none without that search."""
    for o in seen:
        query = str(o.arguments.get("query", "")).strip()
        if o.tool == SEARCH_CORPUS and not o.arguments.get("where") and query == question.strip():
            return list(dict.fromkeys(doc_id_of(c.id) for c in o.chunks))
    return []


def _has_more_chunks(doc: str, seen: list[ToolReply]) -> bool:
    """Whether a search showed a later chunk of ``doc`` (so it has more than one to read)."""
    return any(doc_id_of(c.id) == doc and not c.id.endswith("_0") for o in seen for c in o.chunks)


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
