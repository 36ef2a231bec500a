"""LLM access for the task pipeline: an OpenAI-compatible endpoint behind a record/replay cache.

Every request is keyed by a SHA-256 of its canonical JSON (model, messages, tools and every
parameter that changes the answer, plus a ``sample`` number that lets a caller ask the same prompt
again for a fresh draw). Each response is stored as one JSON file, so a recorded run replays
bit for bit with no network:

* ``record``: always call the endpoint and store the response (overwriting an older one);
* ``replay``: never call; a missing key is a :class:`CacheMissError` naming the stage and key;
* ``auto``: replay what is stored, call and store what is not.

Live calls are rate limited (requests per second) and retried by tenacity, with exponential backoff
and jitter (at least a server's ``Retry-After``), on what :func:`sleuth.policies.http.is_retryable`
calls transient; every retry is counted in the ledger. Token usage (and cost, given prices per 1k
tokens) is tallied per pipeline stage in ``ledger.json`` of the run directory.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from sleuth.errors import ConfigError, InputError, SleuthError
from sleuth.harness.policy import ToolCall, assistant_message
from sleuth.io import atomic_write_text, read_json
from sleuth.policies.http import is_retryable, openai_client
from sleuth.policies.openai_chat import EndpointError, parse_chat_completion

Message = dict[str, Any]


class CacheMode(StrEnum):
    """How :class:`ChatLLM` uses its cache (see the module docstring)."""

    RECORD = "record"
    REPLAY = "replay"
    AUTO = "auto"


class CacheMissError(SleuthError, LookupError):
    """Replay mode met a request that was never recorded."""


class LLMError(SleuthError, RuntimeError):
    """The endpoint kept failing after every retry, or answered with something unusable."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ChatResult(BaseModel):
    """The parts of a chat completion the pipeline uses, parsed the same way live and replayed."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    key: str = ""
    """The cache key of the request that produced it."""
    replayed: bool = False

    def assistant_message(self) -> Message:
        """The assistant turn to append to the conversation, rebuilt from the parsed fields so
        that a replayed run sends exactly the same history as the recorded one."""
        return assistant_message(self.content or "", self.tool_calls)


class LLM(Protocol):
    """What the stages need from a model: one chat completion, tallied under a stage name."""

    def complete(
        self,
        messages: list[Message],
        *,
        stage: str,
        tools: list[dict[str, Any]] | None = None,
        sample: int = 0,
        **params: Any,
    ) -> ChatResult: ...


@dataclass(frozen=True)
class LLMConfig:
    """Endpoint, cache and limits of :class:`ChatLLM`; checked when built (a
    :class:`ConfigError` names the setting to fix)."""

    model: str
    """Model name sent to the endpoint (and part of every cache key)."""
    base_url: str | None = None
    """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8000/v1``; None = the client default."""
    api_key: str = "EMPTY"
    """Sent as the bearer token; local servers usually ignore it."""
    cache_dir: Path | None = None
    """Where responses are stored; None disables the cache (only valid with mode ``record``)."""
    mode: CacheMode = CacheMode.AUTO
    """How the cache is used (:class:`CacheMode`; its string value is accepted too)."""
    requests_per_second: float | None = None
    """Upper bound on live request starts per second; None = unlimited."""
    max_retries: int = 4
    """Retries after the first attempt, on transient failures (connection errors, 429, 503...)."""
    backoff_s: float = 1.0
    """First retry delay; doubles on each retry (plus jitter), capped at ``max_backoff_s``."""
    max_backoff_s: float = 30.0
    """Longest delay between two retries."""
    timeout_s: float = 120.0
    """Per-request time limit, in seconds."""
    price_prompt_per_1k: float = 0.0
    """Price per 1,000 prompt tokens, for the ledger's cost column."""
    price_completion_per_1k: float = 0.0
    """Price per 1,000 completion tokens."""
    params: dict[str, Any] = field(default_factory=dict)
    """Default request parameters (temperature, max_tokens, seed...); per-call ones win."""

    def __post_init__(self) -> None:
        modes = [m.value for m in CacheMode]
        if self.mode not in modes:
            raise ConfigError(f"unknown cache mode {self.mode!r}; use one of {', '.join(modes)}")
        object.__setattr__(self, "mode", CacheMode(self.mode))
        if self.cache_dir is None and self.mode != CacheMode.RECORD:
            raise ConfigError(f"cache mode {self.mode} needs a cache directory (or use 'record')")
        if self.requests_per_second is not None and self.requests_per_second <= 0:
            raise ConfigError("requests per second must be positive (or unset for no limit)")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries ({self.max_retries}) must be 0 or more")
        if not 0 < self.backoff_s <= self.max_backoff_s:
            raise ConfigError(
                f"need 0 < backoff_s ({self.backoff_s}) <= max_backoff_s ({self.max_backoff_s})"
            )
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s ({self.timeout_s}) must be positive")
        if self.price_prompt_per_1k < 0 or self.price_completion_per_1k < 0:
            raise ConfigError("prices per 1k tokens must be 0 or more")


def request_key(model: str, messages: list[Message], tools: Any, params: dict[str, Any]) -> str:
    """Stable hash of a request: canonical JSON (sorted keys, no spaces) through SHA-256."""
    canonical = json.dumps(
        {"model": model, "messages": messages, "tools": tools, "params": params},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per request key, ``<dir>/<key[:2]>/<key>.json``: request and response."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        if not path.exists():
            return None
        entry = read_json(path, fix="delete it to ask the model again")
        if not isinstance(entry, dict) or "response" not in entry:
            raise InputError(
                "not a cached reply; delete it to ask the model again", source=str(path)
            )
        response: dict[str, Any] = entry["response"]
        return response

    def put(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        entry = {"key": key, "request": request, "response": response, "recorded_at": _now()}
        atomic_write_text(self.path(key), json.dumps(entry, ensure_ascii=False, indent=1))


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart, across threads."""

    def __init__(self, rate: float | None, clock: Callable[[], float] = time.monotonic):
        self.interval = 1.0 / rate if rate else 0.0
        self.clock = clock
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class StageUsage(BaseModel):
    """Totals of one stage in the ledger."""

    calls: int = 0
    live_calls: int = 0
    replayed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    """Spent on live calls only; a replayed call costs nothing."""
    retries: int = 0
    """Live requests resent after a transient failure."""


class Ledger:
    """Per-stage token and cost totals, kept in ``<run dir>/ledger.json`` (resumed runs add up)."""

    def __init__(self, path: Path | None, price_prompt: float = 0.0, price_completion: float = 0.0):
        self.path = path
        self.prices = (price_prompt, price_completion)
        self.stages: dict[str, StageUsage] = {}
        self._lock = threading.Lock()
        if path is not None and path.exists():
            saved = read_json(path, fix="delete it to count from zero")
            try:
                self.stages = {k: StageUsage.model_validate(v) for k, v in saved["stages"].items()}
            except (TypeError, KeyError, AttributeError, ValueError):
                raise InputError(
                    "not a usage ledger; delete it to count from zero", source=str(path)
                ) from None

    def add(self, stage: str, usage: Usage, replayed: bool) -> None:
        with self._lock:
            row = self.stages.setdefault(stage, StageUsage())
            row.calls += 1
            row.prompt_tokens += usage.prompt_tokens
            row.completion_tokens += usage.completion_tokens
            if replayed:
                row.replayed_calls += 1
            else:
                row.live_calls += 1
                row.cost_usd += (
                    usage.prompt_tokens * self.prices[0] + usage.completion_tokens * self.prices[1]
                ) / 1000
            self._save()

    def add_retry(self, stage: str) -> None:
        with self._lock:
            self.stages.setdefault(stage, StageUsage()).retries += 1
            self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        body = {
            "prices_per_1k": {"prompt": self.prices[0], "completion": self.prices[1]},
            "stages": {k: v.model_dump() for k, v in sorted(self.stages.items())},
        }
        atomic_write_text(self.path, json.dumps(body, indent=2))


class ChatLLM:
    """:class:`LLM` over an OpenAI-compatible endpoint through the official ``openai`` client.

    Example::

        llm = ChatLLM(LLMConfig("gpt-4.1-mini", cache_dir=Path("run/llm-cache")), Path("run"))
        result = llm.complete([{"role": "user", "content": "hi"}], stage="explore")
    """

    def __init__(self, config: LLMConfig, run_dir: Path | None = None):
        self.config = config
        self.cache = ResponseCache(config.cache_dir) if config.cache_dir else None
        ledger_path = Path(run_dir) / "ledger.json" if run_dir else None
        self.ledger = Ledger(
            ledger_path, config.price_prompt_per_1k, config.price_completion_per_1k
        )
        self.limiter = RateLimiter(config.requests_per_second)
        self._client: Any = None

    def complete(
        self,
        messages: list[Message],
        *,
        stage: str,
        tools: list[dict[str, Any]] | None = None,
        sample: int = 0,
        **params: Any,
    ) -> ChatResult:
        """One chat completion, from the cache or the endpoint (see :class:`CacheMode`).

        Args:
            messages: the conversation, as OpenAI chat messages.
            stage: the ledger row to charge.
            tools: function schemas, or None.
            sample: draw number; a different value asks the same prompt again for a new answer.
            **params: request parameters (``tool_choice``, ``response_format``, ``temperature``...).

        Raises:
            CacheMissError: replay mode and the request was never recorded.
            LLMError: the endpoint failed after every retry.
        """
        sent = {**self.config.params, **params}
        key = request_key(self.config.model, messages, tools, {**sent, "sample": sample})
        raw = self._lookup(key, stage)
        replayed = raw is not None
        if raw is None:
            raw = self._call(messages, tools, sent, stage)
            if self.cache is not None:
                request = {"model": self.config.model, "messages": messages, "tools": tools}
                self.cache.put(key, request | {"params": sent, "sample": sample}, raw)
        result = parse_response(raw, key, replayed)
        self.ledger.add(stage, result.usage, replayed)
        return result

    def _lookup(self, key: str, stage: str) -> dict[str, Any] | None:
        if self.config.mode == CacheMode.RECORD or self.cache is None:
            return None
        raw = self.cache.get(key)
        if raw is None and self.config.mode == CacheMode.REPLAY:
            raise CacheMissError(
                f"stage {stage}: request {key[:16]}… is not in the cache {self.cache.root}; "
                "record it first (mode 'record' or 'auto' with a live endpoint)"
            )
        return raw

    def _call(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        params: dict[str, Any],
        stage: str,
    ) -> dict[str, Any]:
        import openai

        extra = {"tools": tools} if tools else {}
        retrying = Retrying(
            retry=retry_if_exception(is_retryable),
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            before_sleep=lambda state: self.ledger.add_retry(stage),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    self.limiter.wait()
                    response = self._openai().chat.completions.create(
                        model=self.config.model, messages=messages, **extra, **params
                    )
        except openai.APIStatusError as e:
            if is_retryable(e):
                raise LLMError(self._gave_up(retrying, e)) from e
            raise LLMError(f"{self.config.model}: request rejected ({e.status_code}): {e}") from e
        except openai.APIError as e:
            raise LLMError(self._gave_up(retrying, e)) from e
        dumped: dict[str, Any] = response.model_dump(mode="json")
        return dumped

    def _gave_up(self, retrying: Retrying, error: Exception) -> str:
        tries = retrying.statistics.get("attempt_number", 1)
        return f"{self.config.model}: gave up after {tries} tries: {error}"

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with jitter, and never less than the server's ``Retry-After``."""
        backoff = wait_exponential_jitter(
            multiplier=self.config.backoff_s,
            max=self.config.max_backoff_s,
            jitter=self.config.backoff_s,
        )(state)
        error = state.outcome.exception() if state.outcome else None
        response = getattr(error, "response", None)
        header = response.headers.get("retry-after", "") if response is not None else ""
        return max(backoff, float(header)) if header.replace(".", "", 1).isdigit() else backoff

    def _openai(self) -> Any:
        # Built on first live call, so replay never touches the network stack.
        if self._client is None:
            self._client = openai_client(
                self.config.base_url,
                self.config.api_key,
                self.config.timeout_s,
                max_retries=0,  # retries are tenacity's, so each is counted and rate limited
            )
        return self._client


def parse_response(raw: dict[str, Any], key: str = "", replayed: bool = False) -> ChatResult:
    """The :class:`ChatResult` of a raw chat-completion JSON object, read by the policies' parser
    (:func:`sleuth.policies.openai_chat.parse_chat_completion`); a call without an id gets
    ``call_<i>``, one without arguments ``{}``."""
    try:
        output = parse_chat_completion(raw)
    except EndpointError as e:
        raise LLMError(f"response {key[:16]} has no choices[0].message") from e
    calls = [
        c.model_copy(update={"id": c.id or f"call_{i}", "arguments": c.arguments or "{}"})
        for i, c in enumerate(output.tool_calls)
    ]
    return ChatResult(
        content=output.text,
        tool_calls=calls,
        finish_reason=output.finish_reason,
        usage=Usage(
            prompt_tokens=output.usage.get("prompt_tokens") or 0,
            completion_tokens=output.usage.get("completion_tokens") or 0,
        ),
        key=key,
        replayed=replayed,
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
