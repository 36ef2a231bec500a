"""The LLM-free task generator: verified single-hop, bridge and comparison tasks from a corpus.

It needs only titled documents (a Wikipedia-like corpus). Document A *links* to document B when a
sentence of A names B's title. From that link structure it builds three templates:

* ``single`` (1 hop): a verbatim sentence of B with B's names, years and numbers masked; the
  answer is B's title.
* ``bridge`` (2 hops): a sentence of B describing ``[Y]`` plus the few words of A around its
  mention of ``[Y]`` (a phrase no other document contains); the answer is A's title, so the
  solver identifies B first and follows its name to A.
* ``comparison`` (2 hops): two people (or two works) whose first sentences give a birth (or
  release) year, both masked; the answer is the title of the earlier one.

Every draft goes through :func:`~sleuth.datagen.evidence.verify_extraction` with its verbatim
sentences as the quotes, so a task ships only if each clue is backed by a quote found in a gold
document, the answer is in a gold document, and neither clues nor query contain the answer.
Distractors are BM25 neighbours of the clues that do not contain the answer or an alias. Each task
records where its gold documents rank in BM25 for its full query (``bm25_gold_ranks``, and
``bm25_answer_rank`` for the document whose title is the answer) and whether one of them is the
top hit (``bm25_top1_gold``, the leakage flag).

Output is deterministic for a given corpus, ``n`` and seed.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from sleuth.corpus.models import Document
from sleuth.datagen.evidence import QuoteEvidence, answer_pattern, verify_extraction
from sleuth.datagen.offline.masking import (
    PLACEHOLDER,
    Entity,
    ascii_fold,
    birth_year,
    content_words,
    document_words,
    mask_text,
    name_regex,
    profile_document,
    release_year,
)
from sleuth.datagen.quality import QualityReport, StageTally, build_report
from sleuth.datagen.quotes import normalize
from sleuth.errors import ConfigError
from sleuth.tasks import Task

OFFLINE_GENERATOR = "offline-link-v1"
DOMAIN = "wiki"
TEMPLATES = ("single", "bridge", "comparison")
TARGET, OTHER = "[X]", "[Y]"
LEAK_DEPTH = 10
_WORD = re.compile(r"\w+")
_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True)
class OfflineConfig:
    """Knobs of the offline generator; the defaults suit a pooled Wikipedia-paragraph corpus."""

    mix: tuple[float, float, float] = (0.4, 0.4, 0.2)
    """Target shares of ``single``, ``bridge`` and ``comparison`` tasks; a template that runs
    out of candidates leaves its share to the others."""
    distractors: int = 5
    """Distractors kept per task."""
    min_distractors: int = 3
    """A task with fewer clean distractors is dropped."""
    distractor_depth: int = 30
    """BM25 hits of the clues examined when mining distractors."""
    min_clue_words: int = 5
    """Searchable words (see :func:`~sleuth.datagen.offline.masking.content_words`) a clue must keep
    after masking; fewer in a small corpus (see :func:`min_clue_words`)."""
    min_rare_words: int = 2
    """Of those, how many must be rare in the corpus, so the clue singles out one entity
    ("was an American actor" does not)."""
    rare_df: float = 0.01
    """A word is rare when at most this share of documents contain it; a small corpus allows
    more (see :func:`rare_limit`)."""
    window_words: int = 4
    """Words kept on each side of the mention in a bridge's second clue."""
    min_window_words: int = 2
    """Searchable words the second clue of a bridge must keep after masking."""
    max_clue_chars: int = 400
    """Longer sentences make clues that read as documents, not clues."""
    min_name_chars: int = 4
    """Shorter titles ("Up", "It") are ordinary words, not links."""
    max_name_df: int = 10
    """A name found (case-insensitively) in more documents than this is too common to link."""

    def __post_init__(self) -> None:
        if len(self.mix) != 3 or any(m < 0 for m in self.mix) or sum(self.mix) <= 0:
            raise ConfigError(f"mix {self.mix} needs three non-negative shares, e.g. (4, 4, 2)")
        if self.min_distractors > self.distractors:
            raise ConfigError(
                f"min_distractors ({self.min_distractors}) exceeds distractors "
                f"({self.distractors}); lower min_distractors"
            )


@dataclass(frozen=True)
class Link:
    """Sentence ``sentence`` of document ``source`` names document ``target``."""

    source: str
    target: str
    sentence: int


@dataclass(frozen=True)
class Draft:
    """A task before verification and distractor mining."""

    template: str
    hops: int
    clues: tuple[str, ...]
    query: str
    answer: Entity
    gold: tuple[str, ...]
    """Gold document ids in hop order."""
    evidence: dict[str, list[QuoteEvidence]] = field(hash=False)


class OfflineBM25:
    """BM25 (bm25s, English stemming and stopwords) over whole documents, ids in corpus order."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]):
        import bm25s  # imported here: it pulls in scipy, which `import sleuth.datagen` need not
        import Stemmer

        self._ids = list(ids)
        self._tokenizer = bm25s.tokenization.Tokenizer(
            stemmer=Stemmer.Stemmer("english"), stopwords="en"
        )
        tokens = self._tokenizer.tokenize(list(texts), return_as="ids", show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(tokens, show_progress=False)
        self._id_rank = np.argsort(np.argsort(np.asarray(self._ids, dtype=object)))

    def search(self, query: str, k: int) -> list[str]:
        """Ids of the top ``k`` documents with a positive score, best first, ties by id (the
        order is stored in task files, so it must not depend on the machine or corpus order)."""
        from sleuth.index.lexical import rank_scores

        tokens = self._tokenizer.tokenize(
            [query], update_vocab=False, return_as="ids", show_progress=False
        )[0]
        if not tokens:
            return []
        scores = self._bm25.get_scores(tokens)
        return [self._ids[i] for i in rank_scores(scores, k, self._id_rank)]


@dataclass
class Corpus:
    """Documents, their entity profiles, normalised texts, BM25 index and links."""

    texts: dict[str, str]
    entities: dict[str, Entity]
    normalized: dict[str, str]
    lexical: OfflineBM25
    links: list[Link]
    mentions: dict[str, set[str]]
    """Entity id → ids of the documents naming it in any case (candidates for ambiguity)."""
    word_df: Counter[str]
    """Casefolded word → number of documents containing it."""

    @classmethod
    def build(cls, documents: Sequence[Document], config: OfflineConfig) -> Corpus:
        texts = {d.id: d.text for d in documents}
        profiles = (profile_document(d) for d in documents)
        entities = {e.doc_id: e for e in profiles if e is not None}
        links, mentions = build_links(entities, texts, config)
        return cls(
            texts=texts,
            entities=entities,
            normalized={i: normalize(t) for i, t in texts.items()},
            lexical=OfflineBM25(list(texts), list(texts.values())),
            links=links,
            mentions=mentions,
            word_df=Counter(w for t in texts.values() for w in document_words(t)),
        )

    def is_rare(self, word: str, share: float) -> bool:
        return self.word_df[word] <= rare_limit(len(self.texts), share)


def rare_limit(n_docs: int, share: float) -> float:
    """Most documents a rare word may be in: ``share`` of them, but never fewer than 2 or log2
    of the corpus size. Below about 1,000 documents a share allows almost nothing, while names
    there recur in the few documents that mention each other and two such words still single
    out an entity; above it the share decides."""
    return max(2.0, share * n_docs, math.log2(max(n_docs, 1)))


def min_clue_words(n_docs: int, configured: int) -> int:
    """Searchable words a clue needs: ``configured`` from 1,000 documents up, down to 3 in a
    corpus of tens (short stub articles, and fewer rivals to tell apart)."""
    return min(configured, max(3, round(math.log10(max(n_docs, 1))) + 2))


def build_links(
    entities: dict[str, Entity], texts: dict[str, str], config: OfflineConfig
) -> tuple[list[Link], dict[str, set[str]]]:
    """Every (A, B, sentence) where a sentence of A names B with B's exact capitalisation, and
    for each B the documents naming it in any case.

    Names shared by two entities, one-word names cut from a disambiguated title, and names in
    more than ``max_name_df`` documents do not link; nor do sentence-initial single words
    (capitalised anyway).
    """
    index = _first_word_index(entities, config)
    found: dict[tuple[str, str], tuple[int, str]] = {}
    df: Counter[str] = Counter()
    mentions: dict[str, set[str]] = {}
    for doc_id, entity in entities.items():
        seen: set[str] = set()
        for i, (start, end) in enumerate(entity.sentences):
            for name, owner, pos in _mentions(index, texts[doc_id], start, end):
                seen.add(name)
                mentions.setdefault(owner, set()).add(doc_id)
                is_exact = texts[doc_id].startswith(name, pos) and (" " in name or pos > start)
                if owner != doc_id and is_exact:
                    found.setdefault((doc_id, owner), (i, name))
        df.update(seen)
    links = [
        Link(source, target, i)
        for (source, target), (i, name) in sorted(found.items())
        if df[name] <= config.max_name_df
    ]
    return links, mentions


def _first_word_index(
    entities: dict[str, Entity], config: OfflineConfig
) -> dict[str, list[tuple[str, str, re.Pattern[str]]]]:
    """Casefolded first word → (name, owner id, pattern) for every unambiguous linkable name."""
    owners: dict[str, set[str]] = {}
    for entity in entities.values():
        for name in entity.names:
            owners.setdefault(name.casefold(), set()).add(entity.doc_id)
    index: dict[str, list[tuple[str, str, re.Pattern[str]]]] = {}
    for entity in entities.values():
        for name in entity.names:
            first = re.match(r"\w+", name)
            # "Heaven (song)" says itself that the bare word "Heaven" means other things too.
            ambiguous = " " not in name and name != entity.title
            linkable = len(name) >= config.min_name_chars and re.search(r"[^\W\d_]", name)
            if first and linkable and not ambiguous and len(owners[name.casefold()]) == 1:
                pattern = re.compile(name_regex(name), re.IGNORECASE)
                index.setdefault(first.group().casefold(), []).append(
                    (name, entity.doc_id, pattern)
                )
    return index


def _mentions(
    index: dict[str, list[tuple[str, str, re.Pattern[str]]]], text: str, start: int, end: int
) -> Iterator[tuple[str, str, int]]:
    """(name, owner, position) of every indexed name in ``text[start:end]``."""
    for word in _WORD.finditer(text, start, end):
        for name, owner, pattern in index.get(word.group().casefold(), ()):
            if pattern.match(text, word.start(), end):
                yield name, owner, word.start()


# --- templates -------------------------------------------------------------------------------


def draft_single(entity: Entity, corpus: Corpus, config: OfflineConfig) -> Draft | str:
    """A one-hop task: which entity does this masked sentence describe?"""
    picked = _clue_sentence(entity, [(entity, TARGET)], TARGET, corpus, config)
    if picked is None:
        return "no_clue_sentence"
    quote, clue = picked
    query = f'Clue about {TARGET}, {_a(entity.kind)}: "{clue}" {_ask(entity.kind, TARGET)}'
    evidence = {entity.doc_id: [QuoteEvidence(quote=quote, clue_indices=[0])]}
    return Draft("single", 1, (clue,), query, entity, (entity.doc_id,), evidence)


def draft_bridge(link: Link, corpus: Corpus, config: OfflineConfig) -> Draft | str:
    """A two-hop bridge: clue 1 identifies ``[Y]`` (B); clue 2 is the few words around the
    mention of ``[Y]`` in A, found in no other document, so A is reached only through B."""
    a, b = corpus.entities[link.source], corpus.entities[link.target]
    masks = [(a, TARGET), (b, OTHER)]
    picked = _clue_sentence(b, masks, OTHER, corpus, config, forbid=TARGET)
    if picked is None:
        return "no_clue_sentence"
    quote_b, clue_b = picked
    quote_a = _mention_window(a, b, link.sentence, corpus, config)
    clue_a = mask_text(quote_a, masks) if quote_a else ""
    if OTHER not in clue_a or len(content_words(clue_a)) < config.min_window_words:
        return "weak_link_window"
    others = corpus.mentions.get(b.doc_id, set()) - {a.doc_id}
    if any(normalize(quote_a) in corpus.normalized[d] for d in others):
        return "ambiguous_link_window"
    query = (
        f'Clue 1 is about {OTHER}, {_a(b.kind)}: "{clue_b}" '
        f'Clue 2: the article about {TARGET}, {_a(a.kind)}, says "{clue_a}". '
        f"{_ask(a.kind, TARGET)}"
    )
    evidence = {
        b.doc_id: [QuoteEvidence(quote=quote_b, clue_indices=[0])],
        a.doc_id: [QuoteEvidence(quote=quote_a, clue_indices=[1])],
    }
    return Draft("bridge", 2, (clue_b, clue_a), query, a, (b.doc_id, a.doc_id), evidence)


def _mention_window(
    a: Entity, b: Entity, sentence: int, corpus: Corpus, config: OfflineConfig
) -> str | None:
    """The verbatim words of A's sentence around its first mention of B."""
    text = corpus.texts[a.doc_id]
    start, end = a.sentences[sentence]
    spans = [
        m.span()
        for name in b.names
        for m in re.compile(name_regex(name), re.IGNORECASE).finditer(text, start, end)
    ]
    if not spans:
        return None
    first = min(spans)
    tokens = [t.span() for t in _TOKEN.finditer(text, start, end)]
    before = [t for t in tokens if t[1] <= first[0]][-config.window_words :]
    after = [t for t in tokens if t[0] >= first[1]][: config.window_words]
    return text[(before or [first])[0][0] : (after or [first])[-1][1]]


def draft_comparison(
    first: Entity, second: Entity, corpus: Corpus, config: OfflineConfig
) -> Draft | str:
    """A two-hop comparison: which of two masked people was born (or works came out) first?"""
    years = [_dating_year(e, corpus) for e in (first, second)]
    if None in years or years[0] == years[1]:
        return "no_distinct_years"
    masks = [(first, TARGET), (second, OTHER)]
    quotes = [corpus.texts[e.doc_id][slice(*e.sentences[0])] for e in (first, second)]
    clues = [mask_text(q, masks) for q in quotes]
    labelled = TARGET in clues[0] and OTHER in clues[1]
    if not labelled or not all(_usable(c, corpus, config) for c in clues):
        return "no_clue_sentence"
    earlier = first if years[0] < years[1] else second
    question = (
        f"Who was born first, {TARGET} or {OTHER}? Give the name."
        if first.kind == "person"
        else f"Which came out first, {TARGET} or {OTHER}? Give the title."
    )
    query = (
        f'Clue 1 is about {TARGET}, {_a(first.kind)}: "{clues[0]}" '
        f'Clue 2 is about {OTHER}, {_a(second.kind)}: "{clues[1]}" {question}'
    )
    evidence = {
        e.doc_id: [QuoteEvidence(quote=q, clue_indices=[i])]
        for i, (e, q) in enumerate(zip((first, second), quotes, strict=True))
    }
    gold = (first.doc_id, second.doc_id)
    return Draft("comparison", 2, tuple(clues), query, earlier, gold, evidence)


def _clue_sentence(
    entity: Entity,
    masks: list[tuple[Entity, str]],
    label: str,
    corpus: Corpus,
    config: OfflineConfig,
    forbid: str | None = None,
) -> tuple[str, str] | None:
    """The first sentence of ``entity`` that, masked, still names it by ``label`` and keeps
    enough searchable words: (verbatim quote, masked clue)."""
    text = corpus.texts[entity.doc_id]
    for start, end in entity.sentences:
        quote = text[start:end]
        clue = mask_text(quote, masks)
        if (
            label in clue
            and (forbid is None or forbid not in clue)
            and _usable(clue, corpus, config)
        ):
            return quote, clue
    return None


def _usable(clue: str, corpus: Corpus, config: OfflineConfig) -> bool:
    """Short enough to read as a clue, with enough words, some rare, to identify its subject."""
    words = content_words(clue)
    rare = [w for w in words if corpus.is_rare(w, config.rare_df)]
    return (
        len(clue) <= config.max_clue_chars
        and len(words) >= min_clue_words(len(corpus.texts), config.min_clue_words)
        and len(rare) >= config.min_rare_words
    )


def _dating_year(entity: Entity, corpus: Corpus) -> int | None:
    text = corpus.texts[entity.doc_id]
    return birth_year(entity, text) or release_year(entity, text)


def _a(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def _ask(kind: str, label: str) -> str:
    if kind == "person":
        return f"Who is {label}? Give the name."
    if kind == "entity":
        return f"What is {label}? Give its name."
    return f"Which {kind} is {label}? Give the title."


def aliases_of(entity: Entity) -> list[str]:
    """Other names accepted as the answer: title variants, the opening form, accent-free forms."""
    forms = [*entity.names, *(ascii_fold(n) for n in entity.names)]
    return [f for f in dict.fromkeys(forms) if f != entity.title]


# --- verification, distractors, leakage ------------------------------------------------------


def verify_draft(draft: Draft, corpus: Corpus) -> list[str]:
    """The verifier's failure reasons for a draft (empty when it passes)."""
    result = verify_extraction(
        {doc_id: corpus.texts[doc_id] for doc_id in draft.gold},
        draft.clues,
        draft.answer.title,
        aliases_of(draft.answer),
        draft.evidence,
        question=draft.query,
    )
    return result.reasons


def offline_distractors(
    draft: Draft, corpus: Corpus, config: OfflineConfig
) -> tuple[list[str], int]:
    """BM25 neighbours of the clues free of the answer and its aliases, and how many were
    rejected for containing it."""
    pattern = answer_pattern(draft.answer.title, aliases_of(draft.answer))
    hits = corpus.lexical.search(_search_text(" ".join(draft.clues)), config.distractor_depth)
    kept, rejected = [], 0
    for doc_id in hits:
        if doc_id in draft.gold:
            continue
        if pattern is None or pattern.search(corpus.normalized[doc_id]):
            rejected += 1
        elif len(kept) < config.distractors:
            kept.append(doc_id)
    return kept, rejected


def gold_ranks(draft: Draft, corpus: Corpus, depth: int = LEAK_DEPTH) -> list[int | None]:
    """1-based rank of each gold document among the top ``depth`` BM25 hits for the full query
    (placeholders removed), None below. Rank 1 anywhere is leakage; all ranked means one
    search finds every gold document."""
    hits = corpus.lexical.search(_search_text(draft.query), depth)
    return [hits.index(d) + 1 if d in hits else None for d in draft.gold]


def _search_text(text: str) -> str:
    return PLACEHOLDER.sub(" ", text)


def to_task(draft: Draft, distractors: list[str], ranks: list[int | None], source: str) -> Task:
    """The SPEC §8 record, with the generator's provenance as extra fields."""
    digest = hashlib.sha1("\x1f".join([draft.template, *draft.gold, *draft.clues]).encode())
    return Task(
        id=f"offline-{draft.template}-{digest.hexdigest()[:12]}",
        query=draft.query,
        answer=draft.answer.title,
        answer_aliases=aliases_of(draft.answer),
        gold_doc_ids=list(draft.gold),
        distractor_doc_ids=distractors,
        domain=DOMAIN,
        hops=draft.hops,
        source=source,
        generator=OFFLINE_GENERATOR,
        template=draft.template,
        clues=list(draft.clues),
        gold_quotes={d: [e.quote for e in ev] for d, ev in draft.evidence.items()},
        bm25_top1_gold=1 in ranks,
        bm25_gold_ranks=ranks,
        bm25_answer_rank=ranks[draft.gold.index(draft.answer.doc_id)],
    )


# --- candidate streams and the run -----------------------------------------------------------


def _singles(corpus: Corpus, rng: random.Random, config: OfflineConfig) -> Iterator[Draft | str]:
    entities = sorted(corpus.entities)
    rng.shuffle(entities)
    for doc_id in entities:
        yield draft_single(corpus.entities[doc_id], corpus, config)


def _bridges(corpus: Corpus, rng: random.Random, config: OfflineConfig) -> Iterator[Draft | str]:
    links = list(corpus.links)
    rng.shuffle(links)
    answered: set[str] = set()
    for link in links:
        if link.source in answered:
            continue  # one bridge per answer keeps the set diverse
        draft = draft_bridge(link, corpus, config)
        if isinstance(draft, Draft):
            answered.add(link.source)
        yield draft


def _comparisons(
    corpus: Corpus, rng: random.Random, config: OfflineConfig
) -> Iterator[Draft | str]:
    by_kind: dict[str, list[Entity]] = {}
    for doc_id in sorted(corpus.entities):
        entity = corpus.entities[doc_id]
        if _dating_year(entity, corpus) is not None:
            by_kind.setdefault(entity.kind, []).append(entity)
    pairs = []
    for kind in sorted(by_kind):
        group = by_kind[kind]
        rng.shuffle(group)
        pairs += list(zip(group[0::2], group[1::2], strict=False))
    rng.shuffle(pairs)
    for first, second in pairs:
        yield draft_comparison(first, second, corpus, config)


_STREAMS = {"single": _singles, "bridge": _bridges, "comparison": _comparisons}


@dataclass
class _Run:
    """The tallies of one run and the tasks kept so far."""

    corpus: Corpus
    config: OfflineConfig
    source: str
    tasks: list[Task] = field(default_factory=list)
    draft: StageTally = field(default_factory=lambda: StageTally("draft"))
    verify: StageTally = field(default_factory=lambda: StageTally("verify"))
    distract: StageTally = field(default_factory=lambda: StageTally("distract"))
    rejected_distractors: int = 0

    def take(self, stream: Iterator[Draft | str], quota: int) -> int:
        """Pull candidates until ``quota`` tasks are kept or the stream ends; returns the kept."""
        kept = 0
        while kept < quota and (draft := next(stream, None)) is not None:
            task = self._process(draft)
            if task is not None:
                self.tasks.append(task)
                kept += 1
        return kept

    def _process(self, draft: Draft | str) -> Task | None:
        if isinstance(draft, str):  # the template found no usable material: the reason
            self.draft.record([draft])
            return None
        self.draft.record([])
        if not self.verify.record(verify_draft(draft, self.corpus)):
            return None
        distractors, rejected = offline_distractors(draft, self.corpus, self.config)
        self.rejected_distractors += rejected
        short = len(distractors) < self.config.min_distractors
        if not self.distract.record(["too_few_distractors"] if short else []):
            return None
        return to_task(draft, distractors, gold_ranks(draft, self.corpus), self.source)


def generate_offline(
    documents: Sequence[Document],
    n: int,
    seed: int = 0,
    *,
    source: str | None = None,
    config: OfflineConfig | None = None,
) -> tuple[list[Task], QualityReport]:
    """Generate up to ``n`` verified tasks from a titled corpus, with the run's quality report.

    Args:
        documents: the corpus; untitled documents serve only as distractors.
        n: how many tasks to keep, split between templates by ``config.mix``.
        seed: fixes the candidate order, hence the output.
        source: the corpus name for ``Task.source``; default: the documents' ``metadata["source"]``.
        config: generator settings.

    Returns:
        The tasks (single, then bridge, then comparison) and the quality report.

    Example::

        docs, _ = read_benchmark("shared/data/2wikimultihopqa_dev")
        tasks, report = generate_offline(docs, n=250, seed=0)
    """
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    config = config or OfflineConfig()
    source = source or _corpus_source(documents)
    run = _Run(Corpus.build(documents, config), config, source)
    rng = random.Random(seed)
    streams = {t: _STREAMS[t](run.corpus, random.Random(rng.random()), config) for t in TEMPLATES}
    missing = 0
    for template, quota in zip(TEMPLATES, _quotas(n, config.mix), strict=True):
        missing += quota - run.take(streams[template], quota)
    for template in TEMPLATES:  # give what a short template could not fill to the others
        missing -= run.take(streams[template], missing)
    stages = [run.draft, run.verify, run.distract]
    report = build_report(
        run.tasks,
        stages,
        run.corpus.texts,
        generator=OFFLINE_GENERATOR,
        source=source,
        seed=seed,
        distractors_rejected=run.rejected_distractors,
    )
    report.shortfall = shortfall(run.corpus, report, n)
    return run.tasks, report


_ADVICE = {
    "no_clue_sentence": "sentences are too short or too generic to single out their subject "
    "once masked: give longer documents, or lower OfflineConfig.min_clue_words/min_rare_words",
    "weak_link_window": "the words around title mentions are too few: bridges need sentences "
    "that name another document's title in context",
    "ambiguous_link_window": "the words around title mentions recur in other documents",
    "too_few_distractors": "too few similar documents free of the answer: add documents or "
    "lower OfflineConfig.min_distractors",
    "no_distinct_years": "comparisons need people or works dated in their first sentence",
}


def shortfall(corpus: Corpus, report: QualityReport, n: int) -> str | None:
    """Why fewer than ``n`` tasks were made and what to change (None when all were made)."""
    if report.tasks >= n:
        return None
    made = f"made {report.tasks} of {n} tasks"
    if not corpus.entities:
        return f"{made}: no document has a title; the generator needs titled documents"
    reasons: Counter[str] = Counter()
    for stage in report.stages:
        reasons.update(stage.reasons)
    found = (
        f"{len(corpus.entities)} titled documents, {len(corpus.links)} title mentions between them"
    )
    if not reasons:
        return f"{made}: the corpus ran out of candidates ({found}); add documents or lower --n"
    top = ", ".join(f"{r} {c}" for r, c in reasons.most_common(3))
    advice = _ADVICE.get(reasons.most_common(1)[0][0], "see the failure reasons")
    links = "" if corpus.links else "; no document names another's title, so no bridges"
    return f"{made} ({found}{links}); drafts failed for {top}: {advice}; or lower --n"


def _quotas(n: int, mix: tuple[float, float, float]) -> list[int]:
    total = sum(mix)
    quotas = [int(n * m / total) for m in mix]
    quotas[0] += n - sum(quotas)
    return quotas


def _corpus_source(documents: Sequence[Document]) -> str:
    sources = Counter(str(d.metadata.get("source", "")) for d in documents)
    sources.pop("", None)
    return sources.most_common(1)[0][0] if sources else "corpus"
