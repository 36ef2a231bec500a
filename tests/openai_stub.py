"""The one scripted OpenAI-compatible server of the tests (FastAPI + uvicorn on 127.0.0.1).

It plays scripted replies and records every request body it receives, so tests can check
what the harness actually sent over the wire. A reply is an assistant message dict, a
``{"message": ..., <choice fields>}`` dict, an HTTP status code (an error response), or a
function of ``(request_body, index)`` returning one of those; a ready ``Response`` is sent as is
(raw or malformed bodies, custom headers, a ``/v1/completions`` body). A list script may grow
while the server runs.

:func:`answering_server` is the datagen tests' flavour: ``responder(body)`` answers each request
with a message (:func:`reply`, :func:`call`) or a status code, and usage counts grow with the text.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

Body = dict[str, Any]
Reply = dict[str, Any] | int | Response
Script = Sequence[Reply | Callable[[Body, int], Reply]] | Callable[[Body, int], Reply]


def tool_call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    """A tool call in OpenAI wire format."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def assistant(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """An assistant message with optional tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def reply(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An assistant message with optional tool calls (see :func:`call`)."""
    return assistant(*(calls or ()), content=content)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One tool call; its id is derived from name and arguments, so replays match."""
    args = json.dumps(arguments, sort_keys=True)
    return {
        "id": "call_" + hashlib.sha1(f"{name}{args}".encode()).hexdigest()[:12],
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def json_reply(value: Any) -> dict[str, Any]:
    return reply(json.dumps(value))


class StubServer:
    """Serves ``POST`` on ``path`` from a script; use as a context manager or ``start``/``stop``."""

    def __init__(self, script: Script, path: str = "/v1/chat/completions"):
        self.script = script
        self.requests: list[Body] = []
        self._lock = threading.Lock()
        self.port = free_port()
        app = FastAPI()
        app.post(path)(self._complete)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "stub server did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            index = len(self.requests)
            self.requests.append(body)
        reply = self._reply(body, index)
        if isinstance(reply, Response):
            return reply
        if isinstance(reply, int):
            error = {"error": {"message": f"scripted status {reply}", "type": "stub"}}
            return JSONResponse(error, status_code=reply)
        # json.dumps escapes non-ASCII, so lone surrogates travel as \ud800 escapes, as from servers
        completion = json.dumps(_completion(reply, body.get("model", "stub")))
        return Response(completion, media_type="application/json")

    def _reply(self, body: Body, index: int) -> Reply:
        if callable(self.script):
            return self.script(body, index)
        if index >= len(self.script):
            return 500
        step = self.script[index]
        if isinstance(step, Response):  # an ASGI app, so callable: sent as it is
            return step
        return step(body, index) if callable(step) else step


def _completion(reply: dict[str, Any], model: str) -> dict[str, Any]:
    choice = dict(reply) if "message" in reply else {"message": reply}
    message = choice["message"]
    message.setdefault("role", "assistant")
    choice.setdefault("finish_reason", "tool_calls" if message.get("tool_calls") else "stop")
    choice.setdefault("index", 0)
    choice.setdefault("logprobs", None)
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def answering_server(responder: Callable[[Body], dict[str, Any] | int]) -> StubServer:
    """A server whose ``responder(body)`` gives each request a message or a status code."""

    def play(body: Body, index: int) -> Reply:
        answer = responder(body)
        if isinstance(answer, int):
            return answer
        return JSONResponse(_counted_completion(body, answer, index + 1))

    return StubServer(play)


def _counted_completion(body: Body, message: dict[str, Any], n: int) -> dict[str, Any]:
    """A completion whose usage grows with the request and the reply (about 4 characters a token)."""
    prompt = len(json.dumps(body["messages"])) // 4
    completion = len(json.dumps(message)) // 4
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
