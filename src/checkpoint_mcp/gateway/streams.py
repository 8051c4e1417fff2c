"""What one downstream exchange receives: a log of message lines, read by whoever serves it over HTTP.

A ``Stream`` belongs to one request (its related messages, then its response) or to a session's standalone GET
stream (server-initiated messages). Lines are appended by the channel as the interceptor releases them; an HTTP
handler reads them from any position, so a broken SSE connection can be resumed with ``Last-Event-ID`` by a new
one (session era) without losing a message. Event ids are ``<stream id>/<index>``.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any

SSE_HEADERS = {
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",  # tell nginx and friends not to buffer the stream (the transport spec asks for it)
}


KEPT_LINES = 2048  # lines a stream keeps for resumption; beyond, the oldest half is forgotten


class StreamKind(enum.Enum):
    """What a stream carries."""

    REQUEST = "request"  # the messages related to one request, ending with its response
    STANDALONE = "standalone"  # a session's GET stream: server-initiated requests and notifications
    LISTEN = "listen"  # a 2026-07-28 subscriptions/listen request: change notifications, open until closed


class Stream:
    """An append-only log of lines for one exchange, with waiting readers."""

    def __init__(self, stream_id: str, kind: StreamKind, method: str | None = None) -> None:
        self.id = stream_id
        self.kind = kind
        self.method = method
        """The request's method (``tools/call`` …), for metrics."""
        self.lines: list[bytes] = []
        """The lines kept: those from ``base`` on (a GET stream forgets its oldest ones, see ``KEPT_LINES``)."""
        self.base = 0
        self.finished = False
        """The final line (the response) is in; nothing more will come."""
        self.attached = 0
        """How many HTTP connections are reading it now."""
        self.answer: Any = None
        """The final line's JSON body, as the channel parsed it (None if it came unparsed)."""
        self._changed = asyncio.Event()

    def append(self, line: bytes, *, final: bool = False, body: Any = None) -> None:
        """Add one line (ignored once finished); ``final`` for the response that ends a request's stream, with
        its parsed ``body`` if the caller has it (so that nobody parses it again)."""
        if self.finished:
            return
        if final:
            self.answer = body
        self.lines.append(line)
        if len(self.lines) > KEPT_LINES:
            dropped = len(self.lines) - KEPT_LINES // 2
            del self.lines[:dropped]
            self.base += dropped
        if final:
            self.finished = True
        self._changed.set()

    def finish(self) -> None:
        """End the stream without another line (the session or the gateway is closing)."""
        self.finished = True
        self._changed.set()

    @property
    def end(self) -> int:
        """The position after the last line (positions count from the stream's first line, kept or not)."""
        return self.base + len(self.lines)

    def line_at(self, position: int) -> bytes | None:
        """The line at ``position``, or None if it was forgotten."""
        index = position - self.base
        return self.lines[index] if index >= 0 else None

    async def wait_beyond(self, count: int) -> None:
        """Return once the stream has a line at position ``count``, or is finished."""
        while self.end <= count and not self.finished:
            self._changed.clear()
            await self._changed.wait()

    def event_id(self, index: int) -> str:
        """The SSE event id of line ``index``."""
        return f"{self.id}/{index}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(stream id, index)`` of a ``Last-Event-ID`` value, or None if it is not one of ours.

    Index -1 is the priming event's, before the stream's first line.
    """
    stream_id, _, index = value.rpartition("/")
    if not stream_id or not (index.isdigit() or index == "-1"):
        return None
    return stream_id, int(index)


def sse_event(line: bytes, event_id: str | None) -> bytes:
    """One SSE ``message`` event carrying ``line`` (a JSON message on one line) as its data, byte for byte."""
    data = line.rstrip(b"\r\n")
    head = f"id: {event_id}\n".encode() if event_id is not None else b""
    return head + b"event: message\ndata: " + data + b"\n\n"


def priming_event(event_id: str) -> bytes:
    """An SSE event with an id and empty data (SEP-1699): something to resume from before the first message."""
    return f"id: {event_id}\ndata: \n\n".encode()


def json_body(line: bytes) -> bytes:
    """The body of an ``application/json`` response: the message line as it came, without its newline."""
    return line.rstrip(b"\r\n")


def error_body(code: int, message: str, ident: Any = None) -> bytes:
    """A JSON-RPC error response as an HTTP body (``id`` null unless given)."""
    from checkpoint_mcp.wire import error_line

    return json_body(error_line(ident, {"code": code, "message": message}))
