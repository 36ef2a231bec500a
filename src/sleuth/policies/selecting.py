"""A model drives the search; the learned selector writes the final list.

A small model can learn *where* to search from a teacher, but not the teacher's ordering: the
selector ranks with corpus-wide BM25/dense evidence and link features that are not in the
model's context. So the model's final reply is kept as its decision to stop, and its list is
replaced by the selector's order over every document still in view, as the heuristic agent
answers (:meth:`sleuth.policies.heuristic.HeuristicAgent.answer`).
"""

from __future__ import annotations

from typing import Any

from sleuth.harness.policy import Policy, PolicyOutput
from sleuth.policies.heuristic import HeuristicAgent
from sleuth.policies.transcript import observations, query_of
from sleuth.ranking.selector import Selector


class SelectedFinalList:
    """Wraps ``policy``: tool turns pass through, the final list is the selector's top ``final_docs``."""

    def __init__(self, policy: Policy, selector: Selector, final_docs: int):
        self.policy = policy
        self.agent = HeuristicAgent(selector=selector, final_docs=final_docs)  # ranks and answers
        self.name = f"{policy.name}+selector"

    @property
    def final_docs(self) -> int:
        return self.agent.final_docs

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return self.policy.count_tokens(messages, tools)

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        output = self.policy.generate(messages, tools, max_tokens)
        if output.tool_calls or not output.text.strip():
            return output
        seen = observations(messages)
        question = query_of(messages)
        ranked = self.agent.rank(question, seen)
        if not ranked:  # nothing in view: the model's own reply stands
            return output
        text = self.agent.answer(question, ranked, seen)
        # The text is no longer what the model sampled, so its tokens are not kept.
        return output.model_copy(update={"text": text, "token_ids": None, "logprobs": None})
