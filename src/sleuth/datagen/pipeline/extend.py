"""Stage 4, extend: chain hops, then assemble the final task (SPEC §8).

A new hop starts from a **bridging document** that shares one specific fact (a name, place,
date, figure) with a document of the previous hop; its bridging clue points there through the
previous answer, and two more documents lead to a new answer. Unlike the public pipeline, the
shared fact is checked deterministically: it must occur in both the bridging document and the
earlier document. Each new hop is verified exactly like the first (LLM extraction, string
checks) and gets its own distractors before it is kept. The hop count is the difficulty label.

Records that already have their target number of hops are only assembled.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sleuth.datagen.evidence import answer_in_text
from sleuth.datagen.pipeline.agent import Submission, run_agent
from sleuth.datagen.pipeline.checks import check_answer_found, check_documents, check_wording
from sleuth.datagen.pipeline.distract import mine_distractors
from sleuth.datagen.pipeline.explore import SupportItem
from sleuth.datagen.pipeline.extract import verify_hop
from sleuth.datagen.pipeline.prompts import EXTEND_SYSTEM, EXTEND_USER, OBFUSCATION_RULES
from sleuth.datagen.pipeline.records import Bridge, Hop, Status, SupportingDoc, TaskRecord
from sleuth.datagen.pipeline.runner import LLM_GENERATOR, Outcome, Pipeline
from sleuth.datagen.pipeline.workspace import Session
from sleuth.datagen.quotes import normalize
from sleuth.tasks import Task

EARLIER_CHARS = 1500
"""How much of each earlier document the extender is shown up front."""


class HopSubmission(BaseModel):
    """Arguments of ``submit_hop``."""

    bridge_doc_id: str = Field(description="The bridging document (new, read by you).")
    from_doc_id: str = Field(description="The earlier document that shares the fact.")
    shared_fact: str = Field(min_length=1, description="Exact words found in both documents.")
    bridging_clue: str = Field(min_length=5)
    supporting: list[SupportItem] = Field(min_length=2, max_length=2)
    clues: list[str] = Field(min_length=2, max_length=2, description="One per supporting doc.")
    question: str = Field(min_length=5)
    answer: str = Field(min_length=1)
    answer_aliases: list[str] = Field(default_factory=list)
    truth_type: str


def extend(pipeline: Pipeline, record: TaskRecord) -> Outcome:
    """Add hops up to the record's target, then assemble its task."""
    while len(record.hops) < record.seed.target_hops:
        problems = add_hop(pipeline, record)
        if problems:
            return Status.FAILED, "; ".join(f"{p} [hop {len(record.hops) + 1}]" for p in problems)
    task, problems = assemble_task(pipeline, record)
    if task is None:
        return Status.FAILED, "; ".join(problems)
    record.task = task
    return Status.PASSED, f"{task.hops} hop(s)"


def add_hop(pipeline: Pipeline, record: TaskRecord) -> list[str]:
    """Write, verify and mine distractors for one new hop; the problems (none on success)."""
    number = len(record.hops) + 1
    session = pipeline.session(record, f"extend-hop{number}", scoped=False)
    truth_type = session.rng.choice(pipeline.domain.truth_types)
    outcome = run_agent(
        pipeline.llm,
        stage="extend",
        system=EXTEND_SYSTEM.format(
            truth_type=truth_type, rules=OBFUSCATION_RULES, guidance=pipeline.domain.guidance
        ),
        user=_user(record, session),
        tools=session.base_tools() + pipeline.domain.tools(session),
        submission=Submission(
            "submit_hop",
            "Submit the new hop. Rejected submissions come back with what to fix.",
            HopSubmission,
            check=lambda s: _check(s, record, session),
        ),
        max_turns=pipeline.config.max_turns,
    )
    pipeline.store.save_transcript(record.id, f"extend-hop{number}", outcome.messages)
    if outcome.submission is None:
        return [outcome.reason]
    hop = _hop(outcome.submission, record)
    result = verify_hop(pipeline, hop, stage="extend")
    if not result.passed:
        return result.reasons
    mine_distractors(pipeline, record, hop, number, stage="extend")
    record.hops.append(hop)
    return []


def assemble_task(pipeline: Pipeline, record: TaskRecord) -> tuple[Task | None, list[str]]:
    """The solver-facing task: every hop's clues in order, then the last hop's question."""
    hops, final = record.hops, record.hops[-1]
    clues = [c for h in hops for c in h.clues]
    query = " ".join([*clues, final.question])
    problems = [
        f"answer_in_query: hop {i + 1} answer {h.answer!r}"
        for i, h in enumerate(hops)
        if answer_in_text(h.answer, h.answer_aliases, query)
    ]
    gold = list(dict.fromkeys(d for h in hops for d in h.doc_ids))
    distractors = _final_distractors(pipeline, record, gold)
    if len(distractors) < pipeline.config.min_distractors:
        problems.append(f"too_few_distractors: {len(distractors)}")
    if problems:
        return None, problems
    top = [pipeline.ws.index.chunk(c) for c, _ in pipeline.ws.index.lexical_search(query, 1)]
    # validated as Task(...) would be; the generator fields are extras the Task schema keeps
    task = Task.model_validate(
        {
            "id": record.id,
            "query": query,
            "answer": final.answer,
            "answer_aliases": final.answer_aliases,
            "gold_doc_ids": gold,
            "distractor_doc_ids": distractors,
            "domain": record.domain,
            "hops": len(hops),
            "source": pipeline.source,
            "generator": LLM_GENERATOR,
            "truth_type": final.truth_type,
            "clues": clues,
            "gold_per_hop": [_hop_summary(h) for h in hops],
            "gold_quotes": {d: [e.quote for e in ev] for h in hops for d, ev in h.evidence.items()},
            "bm25_top1_gold": bool(top) and top[0] is not None and top[0].doc_id in gold,
        }
    )
    return task, []


def _final_distractors(pipeline: Pipeline, record: TaskRecord, gold: list[str]) -> list[str]:
    """Every hop's distractors that are not gold and do not contain the final answer."""
    final = record.hops[-1]
    kept = []
    for doc_id in dict.fromkeys(d for h in record.hops for d in h.distractors):
        text = pipeline.ws.docs.text(doc_id)
        if doc_id not in gold and not answer_in_text(final.answer, final.answer_aliases, text):
            kept.append(doc_id)
    return kept


def _user(record: TaskRecord, session: Session) -> str:
    previous = record.hops[-1]
    docs = session.ws.docs
    blocks = [
        f"# {d} | {docs.title(d)}\n{docs.text(d)[:EARLIER_CHARS]}"
        for h in record.hops
        for d in h.doc_ids
    ]
    return EXTEND_USER.format(
        clues="\n".join(f"- {c}" for h in record.hops for c in h.clues),
        answer=previous.answer,
        documents="\n\n".join(blocks),
    )


def _check(s: HopSubmission, record: TaskRecord, session: Session) -> list[str]:
    earlier = [d for h in record.hops for d in h.doc_ids]
    new_docs = [s.bridge_doc_id, *(i.doc_id for i in s.supporting)]
    errors = check_documents(new_docs, session, banned=earlier)
    if s.from_doc_id not in earlier:
        errors.append(f"from_doc_id {s.from_doc_id!r} is not one of the earlier documents")
    elif not errors:
        errors += _check_shared_fact(s, session)
    hidden = [(s.answer, s.answer_aliases), (s.shared_fact, [])]
    hidden += [(h.answer, h.answer_aliases) for h in record.hops]
    titles = [session.ws.docs.title(d) for d in new_docs + earlier]
    errors += check_wording([s.bridging_clue, *s.clues], s.question, hidden, titles)
    if any(normalize(s.answer) == normalize(h.answer) for h in record.hops):
        errors.append("the new answer must differ from every earlier answer")
    if not errors:
        texts = [session.ws.docs.text(d) for d in new_docs]
        errors += check_answer_found(s.answer, s.answer_aliases, texts)
    return errors


def _check_shared_fact(s: HopSubmission, session: Session) -> list[str]:
    docs = session.ws.docs
    return [
        f"shared_fact {s.shared_fact!r} is not written in {d}"
        for d in (s.bridge_doc_id, s.from_doc_id)
        if not answer_in_text(s.shared_fact, [], docs.text(d))
    ]


def _hop(s: HopSubmission, record: TaskRecord) -> Hop:
    from_hop = max(i for i, h in enumerate(record.hops) if s.from_doc_id in h.doc_ids)
    return Hop(
        clues=[s.bridging_clue, *s.clues],
        question=s.question,
        answer=s.answer,
        answer_aliases=s.answer_aliases,
        truth_type=s.truth_type,
        supporting=[
            SupportingDoc(doc_id=s.bridge_doc_id, fact=f"shares {s.shared_fact!r}"),
            *(SupportingDoc(doc_id=i.doc_id, fact=i.fact) for i in s.supporting),
        ],
        bridge=Bridge(
            doc_id=s.bridge_doc_id, from_hop=from_hop, from_doc_id=s.from_doc_id,
            shared_fact=s.shared_fact,
        ),
    )  # fmt: skip


def _hop_summary(hop: Hop) -> dict[str, Any]:
    return {
        "doc_ids": hop.doc_ids,
        "question": hop.question,
        "answer": hop.answer,
        "bridge": hop.bridge.model_dump() if hop.bridge else None,
    }
