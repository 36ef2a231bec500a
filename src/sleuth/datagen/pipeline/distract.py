"""Stage 3, distract: documents that match the clues but not the answer.

Candidates come from an agent that searches for look-alikes (optional) and from the local index
(the top hybrid-search hits of each clue). Each candidate then passes, in this order:

1. it is a known document and not a supporting document of any hop;
2. **the string check**: neither the answer nor any alias occurs in it
   (:func:`~sleuth.datagen.evidence.answer_in_text`), so an answer-bearing candidate is dropped
   before any model sees it;
3. optionally an LLM judge, for paraphrases and references the string check cannot see; any
   "yes" rejects (dropping a good distractor is cheap, keeping a bad one poisons the task).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from sleuth.datagen.docs import DocStore
from sleuth.datagen.evidence import answer_in_text
from sleuth.datagen.pipeline.agent import Submission, run_agent
from sleuth.datagen.pipeline.prompts import DISTRACT_SYSTEM, DISTRACT_USER, JUDGE_SYSTEM, JUDGE_USER
from sleuth.datagen.pipeline.records import Hop, Status, TaskRecord
from sleuth.datagen.pipeline.runner import Outcome, Pipeline
from sleuth.datagen.pipeline.structured import complete_json

JUDGE_CHARS = 12_000
"""Longest document text shown to the judge."""


class Proposal(BaseModel):
    doc_id: str
    reason: str = ""


class DistractorSubmission(BaseModel):
    """Arguments of ``submit_distractors``."""

    distractors: list[Proposal] = Field(default_factory=list)


class Judgement(BaseModel):
    contains_answer: bool
    evidence: str = ""


def distract(pipeline: Pipeline, record: TaskRecord) -> Outcome:
    """Mine distractors for the record's first hop."""
    hop = record.hops[0]
    mine_distractors(pipeline, record, hop, 1, stage="distract")
    if len(hop.distractors) < pipeline.config.min_distractors:
        return Status.FAILED, f"too_few_distractors: {len(hop.distractors)}"
    return Status.PASSED, f"{len(hop.distractors)} kept, {len(hop.rejected_distractors)} rejected"


def mine_distractors(
    pipeline: Pipeline, record: TaskRecord, hop: Hop, number: int, stage: str
) -> None:
    """Fill ``hop.distractors`` and ``hop.rejected_distractors`` of hop ``number`` (1-based),
    charging LLM calls to ``stage`` (see the module docstring)."""
    gold = {d for h in record.hops for d in h.doc_ids} | set(hop.doc_ids)
    # Proposals first: an agent picked them as look-alikes; index hits fill the rest.
    candidates = []
    if pipeline.config.llm_distractors:
        proposed = proposed_candidates(pipeline, record, hop, number, gold, stage)
        candidates = list(dict.fromkeys(proposed))
    candidates += [c for c in index_candidates(pipeline, hop, gold) if c not in candidates]
    hop.distractors, hop.rejected_distractors = [], {}
    for doc_id in candidates:
        if len(hop.distractors) >= pipeline.config.max_distractors:
            break
        reason = rejection(pipeline, hop, doc_id, gold, stage)
        if reason:
            hop.rejected_distractors[doc_id] = reason
        else:
            hop.distractors.append(doc_id)


def index_candidates(pipeline: Pipeline, hop: Hop, gold: set[str]) -> list[str]:
    """Documents of the top hybrid hits of each clue, in clue order then rank order."""
    found: dict[str, None] = {}
    for clue in hop.clues:
        fused = pipeline.ws.toolbox.fused_candidates(clue)[: pipeline.config.clue_candidates]
        for chunk_id, _ in fused:
            row = pipeline.ws.index.chunk(chunk_id)
            if row is not None and row.doc_id not in gold:
                found.setdefault(row.doc_id)
    return list(found)


def proposed_candidates(
    pipeline: Pipeline, record: TaskRecord, hop: Hop, number: int, gold: set[str], stage: str
) -> list[str]:
    """Document ids an agent proposes after searching for look-alikes."""
    session = pipeline.session(record, f"distractors-hop{number}", scoped=False)
    count = pipeline.config.max_distractors
    outcome = run_agent(
        pipeline.llm,
        stage=stage,
        system=DISTRACT_SYSTEM.format(truth_type=hop.truth_type, count=count),
        user=DISTRACT_USER.format(
            clues="\n".join(f"- {c}" for c in hop.clues),
            question=hop.question,
            answer=hop.answer,
            gold=", ".join(sorted(gold)),
        ),
        tools=session.base_tools(),
        submission=Submission(
            "submit_distractors",
            "Submit the distractor documents you found.",
            DistractorSubmission,
            check=lambda s: _check_proposals(s, session.ws.docs, count),
        ),
        max_turns=pipeline.config.max_turns,
    )
    pipeline.store.save_transcript(record.id, f"distractors-hop{number}", outcome.messages)
    return [p.doc_id for p in outcome.submission.distractors] if outcome.submission else []


def rejection(pipeline: Pipeline, hop: Hop, doc_id: str, gold: set[str], stage: str) -> str:
    """Why ``doc_id`` cannot be a distractor of ``hop`` ('' when it can)."""
    if doc_id not in pipeline.ws.docs:
        return "unknown_document"
    if doc_id in gold:
        return "supporting_document"
    text = pipeline.ws.docs.text(doc_id)
    if answer_in_text(hop.answer, hop.answer_aliases, text):
        return "contains_answer"
    if pipeline.config.judge_distractors:
        verdict = judge(pipeline, hop.answer, hop.answer_aliases, doc_id, text, stage)
        if verdict is None or verdict.contains_answer:
            return "judge_contains_answer" if verdict else "judge_unreadable"
    return ""


def judge(
    pipeline: Pipeline, answer: str, aliases: Sequence[str], doc_id: str, text: str, stage: str
) -> Judgement | None:
    user = JUDGE_USER.format(
        answer=answer, aliases=", ".join(aliases) or "none", doc_id=doc_id, text=text[:JUDGE_CHARS]
    )
    messages = [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]
    verdict, _ = complete_json(pipeline.llm, messages, Judgement, stage=stage, name="judgement")
    return verdict


def _check_proposals(s: DistractorSubmission, docs: DocStore, count: int) -> list[str]:
    errors = [f"{p.doc_id}: no such document" for p in s.distractors if p.doc_id not in docs]
    if len(s.distractors) > count:
        errors.append(f"give at most {count} distractors")
    return errors
