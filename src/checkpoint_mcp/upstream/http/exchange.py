"""One HTTP exchange with a remote upstream: how it can end, its response timeout, and reading its answer.

An exchange that does not end in an answer ends in one of two ways: ``Refused`` (the server certainly did not
run the request, so the proxy answers it with ``UpstreamRefused`` and a journaled call is FAILED) or ``Lost``
(it may have run: the request is abandoned and a journaled call stays in doubt). ``NOT_RUN_STATUSES`` is the
list of HTTP statuses that prove the first; docs/remote.md says why for each.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from checkpoint_mcp.upstream.http.client import HttpClient, HttpError, Response
from checkpoint_mcp.upstream.http.headers import OutgoingMessage
from checkpoint_mcp.upstream.http.sse import EventParser, EventTooLarge, to_line
from checkpoint_mcp.wire import Kind, WireParseError, classify, error_line, id_key

ERROR_BODY_LIMIT = 1 << 20  # bytes of a 4xx/5xx body read to look for a JSON-RPC error

# HTTP statuses that prove the server did not run the request: it was refused before any MCP method was
# dispatched (docs/remote.md says why for each). Every other failure status leaves a journaled call in doubt.
NOT_RUN_STATUSES: dict[int, str] = {
    400: "bad request: refused before dispatch",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    405: "method not allowed",
    406: "not acceptable",
    413: "content too large",
    414: "URI too long",
    415: "unsupported media type",
    429: "too many requests",
    431: "request header fields too large",
}


class Lost(Exception):
    """The exchange broke after the request may have reached the server: no answer will come (in doubt)."""


class Refused(Exception):
    """The request certainly did not run: answer it with ``UpstreamRefused``."""

    def __init__(self, status: int | None, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Deadlines:
    """The response timeout of every exchange in progress, stopped while a person is being waited for (OAuth)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._active: set[asyncio.Timeout] = set()
        self._paused = 0

    def _when(self) -> float | None:
        return None if self._paused else asyncio.get_running_loop().time() + self.seconds

    @contextlib.asynccontextmanager
    async def bounded(self) -> AsyncIterator[None]:
        """A block that raises ``TimeoutError`` after ``seconds`` (not counting pauses)."""
        async with asyncio.timeout_at(self._when()) as scope:
            self._active.add(scope)
            try:
                yield
            finally:
                self._active.discard(scope)

    def pause(self, paused: bool) -> None:
        """Stop (True) or restart (False) every running timeout."""
        self._paused = max(0, self._paused + (1 if paused else -1))
        for scope in self._active:
            scope.reschedule(self._when())


def content_type(response: Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_body(response: Response, limit: int | None = None) -> bytes:
    """The body (up to ``limit`` bytes).

    Raises:
        _Lost: the connection broke while reading it.
    """
    body = bytearray()
    try:
        async for chunk in response.aiter_bytes():
            body += chunk
            if limit is not None and len(body) >= limit:
                break
    except HttpError as exc:
        raise Lost(f"the body broke off: {describe(exc)}") from exc
    return bytes(body)


async def read_answer(response: Response, message: OutgoingMessage, deadlines: Deadlines) -> bytes:
    """The answer to ``message`` in a successful response: its JSON body, or the event of its SSE stream that
    answers it (other events are passed over: this is for requests of the proxy's own).

    Raises:
        Lost: the body or stream ended or broke without the answer.
    """
    if content_type(response) != "text/event-stream":
        line = to_line(await read_body(response))
        if not line:
            raise Lost(f"HTTP {response.status_code} with an empty body")
        return line
    parser = EventParser()
    try:
        async with deadlines.bounded():
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    line = to_line(event.data) if event.event == "message" else b""
                    if line and response_key(line) == message.key:
                        return line
    except (HttpError, EventTooLarge, TimeoutError) as exc:
        raise Lost(describe(exc)) from exc
    raise Lost("the stream ended without an answer")


async def send_and_read(client: HttpClient, method: str, url: str, headers: dict[str, str], body: bytes | None) -> int:
    """Send a request whose answer tells only by its status; read its body (bounded) so the connection is kept.

    Raises:
        HttpError: the request failed before a status came.
    """
    response = await client.send(method, url, headers, body)
    try:
        with contextlib.suppress(Lost):
            await read_body(response, ERROR_BODY_LIMIT)
    finally:
        await response.aclose()
    return response.status_code


def jsonrpc_error(body: bytes, message: OutgoingMessage) -> bytes | None:
    """The line to deliver when a failure status carries the server's JSON-RPC error answer; else None."""
    line = to_line(body)
    if not line:
        return None
    try:
        parsed = classify(line)
    except WireParseError:
        return None
    if parsed.kind is not Kind.RESPONSE or "error" not in parsed.body or not isinstance(parsed.body["error"], dict):
        return None
    if parsed.id is None:
        return error_line(message.ident, parsed.body["error"])
    return line if id_key(parsed.id) == message.key else None


def response_key(line: bytes) -> tuple[str, Any] | None:
    try:
        parsed = classify(line)
    except WireParseError:
        return None
    return id_key(parsed.id) if parsed.kind is Kind.RESPONSE else None


def describe(exc: BaseException) -> str:
    """An exception as words for a log line or an error (its message, or its type when it has none)."""
    return str(exc) or type(exc).__name__
