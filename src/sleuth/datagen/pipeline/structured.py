"""Structured JSON answers: ask with a JSON schema, validate with pydantic, redraw on failure."""

from __future__ import annotations

import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from sleuth.datagen.pipeline.llm import LLM, Message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def complete_json(
    llm: LLM,
    messages: list[Message],
    model: type[T],
    *,
    stage: str,
    name: str,
    attempts: int = 1,
    first_sample: int = 0,
) -> tuple[T | None, str]:
    """The first reply that validates as ``model``, or None and the last validation error.

    Each attempt is a new draw (``sample`` = first_sample, first_sample + 1, ...), so a
    recorded run replays the same draws.
    """
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": model.model_json_schema()},
    }
    error = "no attempt"
    for sample in range(first_sample, first_sample + attempts):
        result = llm.complete(messages, stage=stage, sample=sample, response_format=response_format)
        try:
            return model.model_validate_json(strip_fences(result.content or "")), ""
        except ValidationError as e:
            error = f"{name}: invalid JSON reply ({e.error_count()} errors: {e.errors()[0]['msg']})"
    return None, error


def strip_fences(text: str) -> str:
    """Remove a Markdown code fence some models wrap JSON in."""
    match = _FENCE.match(text)
    return match.group(1) if match else text
