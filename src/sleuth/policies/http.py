"""The one way sleuth builds an ``openai`` client (chat and harmony policies, the datagen LLM).

Retries are the client's own (exponential backoff with jitter, honouring ``Retry-After``), with
two exceptions that a resend cannot fix and can make worse:

* a reply that timed out after the request was sent (a read time-out) is not resent: the server
  is still generating the abandoned request, and on a one-slot server (llama.cpp) the copy would
  only queue behind it;
* a 5xx that repeats with the same status for the same request body is deterministic (llama.cpp
  answers HTTP 500 to a request its schema rejects): the repeat is final.

Overload and gateway statuses (408, 409, 429, 502, 503, 504) stay retryable however often they
repeat. :func:`is_retryable` gives the same verdict for callers that count their own retries.
"""

from __future__ import annotations

import hashlib
import threading

import httpx2
import openai

TRANSIENT_STATUSES = frozenset({408, 409, 429, 502, 503, 504})
NO_RETRY = "x-should-retry"  # the openai client obeys this response header
_REMEMBERED = 256  # failed request bodies remembered per client


class ReplyTimeout(openai.APITimeoutError):
    """The server took the request but did not answer in time; it is never resent."""


class _GuardedTransport(httpx2.BaseTransport):
    """Marks deterministic failures not-to-retry and turns read time-outs into :class:`ReplyTimeout`
    (an ``OpenAIError``, which the client raises without retrying)."""

    def __init__(self, inner: httpx2.BaseTransport):
        self._inner = inner
        self._failed: dict[str, int] = {}  # request body hash -> last 5xx status
        self._lock = threading.Lock()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = self._inner.handle_request(request)
        except httpx2.ReadTimeout as exc:
            raise ReplyTimeout(request=request) from exc
        key = hashlib.sha256(request.read()).hexdigest()
        with self._lock:
            if response.status_code < 500 or response.status_code in TRANSIENT_STATUSES:
                self._failed.pop(key, None)
            elif self._failed.pop(key, None) == response.status_code:
                response.headers[NO_RETRY] = "false"
            else:
                if len(self._failed) >= _REMEMBERED:
                    self._failed.clear()
                self._failed[key] = response.status_code
        return response

    def close(self) -> None:
        self._inner.close()


def openai_client(
    base_url: str | None, api_key: str, timeout_s: float, max_retries: int
) -> openai.OpenAI:
    """An ``openai.OpenAI`` client with the retry rules of this module."""
    transport = _GuardedTransport(httpx2.HTTPTransport())
    return openai.OpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout_s,
        max_retries=max_retries,
        http_client=openai.DefaultHttpxClient(transport=transport),
    )


def is_retryable(exc: BaseException) -> bool:
    """Whether the client of :func:`openai_client` would retry after ``exc``."""
    if isinstance(exc, ReplyTimeout):
        return False
    if isinstance(exc, openai.APIConnectionError):  # refused, reset, connect time-out
        return True
    if not isinstance(exc, openai.APIStatusError):
        return False
    if exc.response.headers.get(NO_RETRY) == "false":
        return False
    return exc.status_code in TRANSIENT_STATUSES or exc.status_code >= 500
