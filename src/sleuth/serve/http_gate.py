"""The HTTP gate in front of the MCP SDK's app: readiness probes and the bearer token."""

from __future__ import annotations

import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

MCP_PATH = "/mcp"
SERVER_NAME = "sleuth"


class McpGate:
    """In front of the SDK's HTTP app: answers ``GET /mcp`` at once, and checks the token.

    A stateless server sends no events of its own, so a GET that wants an event stream gets
    405 (as the MCP spec allows) and a plain GET (a readiness probe) gets a small 200 status;
    the SDK would hold either open forever.
    """

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            if scope["method"] == "GET" and scope["path"].rstrip("/") == MCP_PATH:
                return await _probe_reply(headers)(scope, receive, send)
            if self.token and not _bearer_ok(headers.get("authorization", ""), self.token):
                body = {"error": "missing or wrong bearer token"}
                unauthorized = JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})
                return await unauthorized(scope, receive, send)
        await self.app(scope, receive, send)


def _probe_reply(headers: dict[str, str]) -> JSONResponse:
    if "text/event-stream" in headers.get("accept", ""):
        body = {"error": "stateless server: no event stream; POST JSON-RPC requests here"}
        return JSONResponse(body, 405, headers={"Allow": "POST"})
    return JSONResponse({"server": SERVER_NAME, "status": "ready", "transport": "POST JSON-RPC"})


def _bearer_ok(authorization: str, token: str) -> bool:
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )
