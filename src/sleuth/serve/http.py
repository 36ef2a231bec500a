"""The HTTP side of the MCP server: who can reach it (:func:`http_notice`), the gate in front of
the SDK's app (:class:`McpGate`: probes, bearer token), and the port check made before the index
loads (:func:`check_bindable`)."""

from __future__ import annotations

import hmac
import socket

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from sleuth.errors import InputError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # where the SDK checks Host and Origin
TOKEN_ENV = "SLEUTH_MCP_TOKEN"
MCP_PATH = "/mcp"
SERVER_NAME = "sleuth"


def check_bindable(host: str, port: int) -> None:
    """Refuse a host that does not resolve or a port already taken, before the index loads
    (uvicorn would log several lines and exit 3 instead).

    Raises:
        InputError: the address cannot be bound, with the reason and what to change.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise InputError(
            f"--host {host!r} does not resolve ({e}); give a host name or IP"
        ) from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind(address)
        except OSError as e:
            raise InputError(
                f"cannot listen on {host}:{port} ({e.strerror}); choose another --port, or stop "
                "the program that holds it"
            ) from None


def http_notice(host: str, port: int, token: str | None, insecure: bool) -> str:
    """Who can use an HTTP server on ``host``; refuses an unguarded bind beyond loopback.

    The SDK checks Host and Origin only on a loopback name; elsewhere it drops those checks, so
    a token (or a deliberate ``insecure``) must stand in for them.

    Raises:
        InputError: an empty token, or a non-loopback host with neither token nor ``insecure``.
    """
    url = f"http://{host}:{port}{MCP_PATH}"
    if token is not None and not token.strip():
        raise InputError("--token is empty")
    if token:
        return f"sleuth MCP on {url}: clients must send 'Authorization: Bearer <token>'."
    if host in LOCAL_HOSTS:
        return f"sleuth MCP on {url}: this machine only (Host and Origin checked), no token."
    if not insecure:
        raise InputError(
            f"--host {host} opens the index and the subagent to the network with no Host/Origin "
            f"checks: set --token (or ${TOKEN_ENV}) for clients to send, or pass --insecure"
        )
    return f"WARNING: --insecure: {url} serves anyone who can reach it (no token, no Host/Origin checks)."


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
