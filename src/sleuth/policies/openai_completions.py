"""A policy over an OpenAI-compatible ``/v1/completions`` server fed token-id prompts (vLLM).

Prompts are rendered here with the student's ChatML template (:mod:`sleuth.policies.chatml`)
and sent as token ids, so the server samples on exactly the tokens the trainer sees; the sampled
ids and their log-probs come back with the reply.
"""

from __future__ import annotations

from typing import Any

from sleuth.harness.policy import PolicyOutput
from sleuth.policies.chatml import render_ids, sampled_output, stop_token_id
from sleuth.policies.sampling import Sampling


class OpenAICompletionsPolicy:
    """Samples through ``/v1/completions`` with token-id prompts; records ids and log-probs.

    vLLM specifics: ``return_tokens_as_token_ids`` makes each returned token read
    ``"token_id:<id>"``, so ids never go through detokenisation; ``logprobs=1`` returns the
    sampled token's log-prob (at the request's temperature: use 1.0 for RL).
    """

    def __init__(
        self,
        client: Any,
        model: str,
        tokenizer: Any,
        sampling: Sampling | None = None,
        seed: int | None = None,
    ):
        self.name = f"openai-completions:{model}"
        self.client = client
        self.model = model
        self.tokenizer = tokenizer
        self.sampling = sampling or Sampling()
        self.seed = seed
        self.stop_id = stop_token_id(tokenizer)

    def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return len(render_ids(self.tokenizer, messages, tools))

    def generate(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> PolicyOutput:
        prompt_ids = render_ids(self.tokenizer, messages, tools)
        response = self.client.completions.create(
            model=self.model,
            prompt=prompt_ids,
            max_tokens=min(max_tokens, self.sampling.max_new_tokens or max_tokens),
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            seed=self.seed,
            logprobs=1,
            extra_body={"return_tokens_as_token_ids": True, "skip_special_tokens": False},
        )
        choice = response.choices[0]
        token_ids = [int(str(t).rsplit(":", 1)[1]) for t in choice.logprobs.tokens]
        logprobs = [float(x) for x in choice.logprobs.token_logprobs]
        return sampled_output(
            self.tokenizer, prompt_ids, token_ids, logprobs, {self.stop_id}, choice.finish_reason
        )
