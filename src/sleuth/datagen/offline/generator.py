"""The LLM-free task generator: verified single-hop, bridge and comparison tasks from a corpus.

Its link templates need titled documents (a Wikipedia-like corpus). Document A *links* to document B when a
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

When these fall short of ``n`` (a corpus without titles, or of e-mails or short templated
records), two-hop ``relay`` tasks (:mod:`~sleuth.datagen.offline.relay`: through a name, address or
identifier that exactly two documents share; up to a third of what is missing) and one-hop
``fact`` tasks fill the rest (:mod:`~sleuth.datagen.offline.facts`): a verbatim sentence with one
name, address or identifier masked, kept only if no other place in the corpus has the same
sentence around another value.

Output is deterministic for a given corpus, ``n`` and seed.

This module runs the generator; its settings are in :mod:`~sleuth.datagen.offline.config`, the
corpus's entities and links in :mod:`~sleuth.datagen.offline.corpus`, the templates in
:mod:`~sleuth.datagen.offline.templates`, and verification, distractors, leakage and the task
record in :mod:`~sleuth.datagen.offline.vetting`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sleuth.corpus.models import Document
from sleuth.datagen.offline.chains import chain_drafts
from sleuth.datagen.offline.config import OFFLINE_GENERATOR, TEMPLATES, OfflineConfig
from sleuth.datagen.offline.corpus import Corpus
from sleuth.datagen.offline.facts import fact_drafts
from sleuth.datagen.offline.masking import Entity
from sleuth.datagen.offline.relay import relay_drafts
from sleuth.datagen.offline.templates import (
    Draft,
    dating_year,
    draft_bridge,
    draft_comparison,
    draft_single,
)
from sleuth.datagen.offline.vetting import gold_ranks, offline_distractors, to_task, verify_draft
from sleuth.datagen.quality import QualityReport, StageTally, build_report
from sleuth.tasks import Task


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
        if dating_year(entity, corpus) is not None:
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

    def report(self, n: int, seed: int) -> QualityReport:
        """The quality report of the run, with why fewer than ``n`` tasks were made."""
        stages = [self.draft, self.verify, self.distract]
        report = build_report(
            self.tasks,
            stages,
            self.corpus.texts,
            generator=OFFLINE_GENERATOR,
            source=self.source,
            seed=seed,
            distractors_rejected=self.rejected_distractors,
        )
        report.shortfall = shortfall(self.corpus, report, n)
        return report


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
    if config.facts and missing > 0:  # any corpus, titled or not, has facts and shared values
        facts = fact_drafts(run.corpus, random.Random(rng.random()), config)
        relays = relay_drafts(run.corpus, random.Random(rng.random()), config)
        missing -= run.take(relays, missing // 3)  # two hops first, up to a third
        missing -= run.take(facts, missing)
        missing -= run.take(relays, missing)
    return run.tasks, run.report(n, seed)


def generate_chains(
    documents: Sequence[Document],
    n: int,
    seed: int = 0,
    *,
    hops: tuple[int, ...] = (3, 4),
    source: str | None = None,
    config: OfflineConfig | None = None,
) -> tuple[list[Task], QualityReport]:
    """Up to ``n`` verified ``chain`` tasks (:mod:`~sleuth.datagen.offline.chains`) of the given
    hop counts (gold documents per task, alternating), one per answer, and the quality report.

    Chains follow title mentions, so they need a titled, Wikipedia-like corpus; the answer is in
    the last gold document and each gold document names the next. Deterministic for a given
    corpus, ``n``, ``hops`` and seed.
    """
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    if not hops or min(hops) < 2:
        raise ValueError(f"hops must be 2 or more gold documents each, got {hops}")
    config = config or OfflineConfig()
    run = _Run(Corpus.build(documents, config), config, source or _corpus_source(documents))
    run.take(chain_drafts(run.corpus, random.Random(seed), config, hops), n)
    return run.tasks, run.report(n, seed)


_ADVICE = {
    "no_clue_sentence": "sentences are too short or too generic to single out their subject "
    "once masked: give longer documents, or lower OfflineConfig.min_clue_words/min_rare_words",
    "weak_link_window": "the words around title mentions are too few: bridges need sentences "
    "that name another document's title in context",
    "ambiguous_link_window": "the words around title mentions recur in other documents",
    "too_few_distractors": "too few similar documents free of the answer: add documents or "
    "lower OfflineConfig.min_distractors",
    "no_distinct_years": "comparisons need people or works dated in their first sentence",
    "clue_not_unique": "the sentences around names and numbers recur across documents "
    "(templated records): give records that differ in more than the filled-in values",
    "no_answer_span": "no sentence holds a name, e-mail address or identifier to ask for",
}


def shortfall(corpus: Corpus, report: QualityReport, n: int) -> str | None:
    """Why fewer than ``n`` tasks were made and what to change (None when all were made)."""
    if report.tasks >= n:
        return None
    made = f"made {report.tasks} of {n} tasks"
    if not corpus.entities and not report.tasks:
        return f"{made}: no document has a title or a sentence that singles out a name or number"
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
