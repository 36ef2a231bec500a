"""A scripted OpenAI-compatible chat server on 127.0.0.1, for recording LLM responses in tests.

The server runs FastAPI under uvicorn in a thread, on a socket bound to a free port. Each POST to
``/v1/chat/completions`` is stored in ``requests`` and answered by ``responder(body)``, which
returns an assistant message (``reply(...)``) or an HTTP status code to fail with.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Responder = Callable[[dict[str, Any]], dict[str, Any] | int]


def reply(content: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An assistant message with optional tool calls (see :func:`call`)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


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


class ScriptedServer:
    """See the module docstring. Use as a context manager or call ``start``/``stop``."""

    def __init__(self, responder: Responder):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("scripted server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            answer = self.responder(body)
            if isinstance(answer, int):
                return JSONResponse({"error": {"message": "scripted failure"}}, status_code=answer)
            return JSONResponse(_completion(body, answer, len(self.requests)))

        return app


def _completion(body: dict[str, Any], message: dict[str, Any], n: int) -> dict[str, Any]:
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
