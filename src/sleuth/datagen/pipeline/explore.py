"""Stage 1, explore: an agent gathers three supporting documents and writes a one-hop puzzle.

Records are created here (:func:`seed_records`): each gets seed documents, a truth type and, for
scoped domains, the one slice of the corpus its explorer may see, all drawn from the run seed.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.datagen.pipeline.agent import Submission, run_agent
from sleuth.datagen.pipeline.checks import check_answer_found, check_documents, check_wording
from sleuth.datagen.pipeline.prompts import EXPLORE_SYSTEM, EXPLORE_USER, OBFUSCATION_RULES
from sleuth.datagen.pipeline.records import Hop, Seed, Status, SupportingDoc, TaskRecord
from sleuth.datagen.pipeline.runner import Outcome, Pipeline
from sleuth.datagen.pipeline.workspace import Session

SUBMIT = "submit_task"


class SupportItem(BaseModel):
    doc_id: str = Field(description="Id of a document you have read.")
    fact: str = Field(description="The specific fact this document contributes.")


class ExploreSubmission(BaseModel):
    """Arguments of ``submit_task``."""

    supporting: list[SupportItem] = Field(min_length=3, max_length=3)
    clues: list[str] = Field(min_length=3, max_length=3, description="One clue per document.")
    question: str = Field(min_length=5)
    answer: str = Field(min_length=1, description="Copied exactly from a supporting document.")
    answer_aliases: list[str] = Field(default_factory=list)
    truth_type: str


def seed_records(pipeline: Pipeline, n: int) -> int:
    """Create records ``<domain>-<seed>-<i>`` for i < n that do not exist yet; returns how many.

    Ids and seeds depend only on (domain, seed, i), so a rerun with a larger ``n`` adds records
    and never duplicates one.
    """
    added = 0
    domain, seed = pipeline.domain, pipeline.config.seed
    for i in range(n):
        record_id = f"{domain.name}-{seed}-{i:05d}"
        if pipeline.store.path(record_id).exists():
            continue
        rng = pipeline.rng(record_id, "seed")
        pick = domain.pick_seed(pipeline.ws.docs, rng)
        record = TaskRecord(
            id=record_id,
            domain=domain.name,
            seed=Seed(
                doc_ids=pick.doc_ids,
                truth_type=rng.choice(domain.truth_types),
                scope=pick.scope,
                target_hops=pipeline.config.target_hops,
            ),
        )
        added += pipeline.store.add(record)
    return added


def explore(pipeline: Pipeline, record: TaskRecord) -> Outcome:
    """Run the explorer on one record; on success its first hop is set."""
    session = pipeline.session(record, "explore")
    truth_type = record.seed.truth_type
    submission = Submission(
        SUBMIT,
        "Submit the finished puzzle. Rejected submissions come back with what to fix.",
        ExploreSubmission,
        check=lambda s: _check(s, session),
    )
    outcome = run_agent(
        pipeline.llm,
        stage="explore",
        system=EXPLORE_SYSTEM.format(
            truth_type=truth_type, rules=OBFUSCATION_RULES, guidance=pipeline.domain.guidance
        ),
        user=EXPLORE_USER.format(truth_type=truth_type, opening=_opening(record, session)),
        tools=session.base_tools() + pipeline.domain.tools(session),
        submission=submission,
        max_turns=pipeline.config.max_turns,
    )
    pipeline.store.save_transcript(record.id, "explore", outcome.messages)
    if outcome.submission is None:
        return Status.FAILED, outcome.reason
    record.hops = [_hop(outcome.submission)]
    return Status.PASSED, f"{outcome.turns} turns, {outcome.tool_calls} tool calls"


def _opening(record: TaskRecord, session: Session) -> str:
    text = session.ws.previews(record.seed.doc_ids)
    if record.seed.scope:
        text = f"You may only see documents of: {record.seed.scope}.\n{text}"
    return text


def _check(s: ExploreSubmission, session: Session) -> list[str]:
    doc_ids = [item.doc_id for item in s.supporting]
    errors = check_documents(doc_ids, session)
    titles = [session.ws.docs.title(d) for d in doc_ids]
    errors += check_wording(s.clues, s.question, [(s.answer, s.answer_aliases)], titles)
    if not errors:
        texts = [session.ws.docs.text(d) for d in doc_ids]
        errors += check_answer_found(s.answer, s.answer_aliases, texts)
    return errors


def _hop(s: ExploreSubmission) -> Hop:
    return Hop(
        clues=s.clues,
        question=s.question,
        answer=s.answer,
        answer_aliases=s.answer_aliases,
        truth_type=s.truth_type,
        supporting=[SupportingDoc(doc_id=i.doc_id, fact=i.fact) for i in s.supporting],
    )
