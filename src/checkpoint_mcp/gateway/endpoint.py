"""The MCP endpoint (`/mcp`, `/w/{workflow}/mcp`): Streamable HTTP in both eras, as a plain ASGI app.

POST carries one JSON-RPC message. Its era is told by the request itself:

* with ``Mcp-Session-Id``: the session era; an unknown session is 404;
* an ``initialize`` request without it: a new session (the response carries its ``Mcp-Session-Id``);
* otherwise, a request of 2026-07-28 (``MCP-Protocol-Version`` newer than 2025-11-25, or the protocol version in
  the request's ``_meta``), served on the workflow's shared channel; anything else is 400.

In the session era, a request whose client accepts ``text/event-stream`` is answered on an SSE stream of its
own, opened at once, before the upstream says anything (as the reference SDKs' servers do): concurrent requests
each have a live stream however long their upstream takes. A client of 2025-11-25 or later first gets a priming
event (an event id, no data: SEP-1699), so it can resume the stream with ``Last-Event-ID`` even before the first
message. Otherwise (2026-07-28, whose HTTP status depends on the answer, or a client that accepts only JSON), a
request's answer is a single JSON body when the response is the first thing its upstream sends for it, and an SSE
stream as soon as something related comes first (progress, a log message, a sampling request). Message bodies are
the original bytes both ways; a body spread over several lines travels upstream as one line (the line breaks
between JSON tokens become spaces).
GET opens a session's standalone SSE stream, or with ``Last-Event-ID`` resumes a broken one; DELETE ends a
session. In 2026-07-28, closing a request's stream cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from checkpoint_mcp.errors import CheckpointError, JournalError, WorkflowOfAnother, WorkflowOwned
from checkpoint_mcp.gateway.backend import Backend
from checkpoint_mcp.gateway.security import PRINCIPAL, Receive, Scope, Send, header, respond
from checkpoint_mcp.gateway.sessions import Gateway, Session
from checkpoint_mcp.gateway.streams import (
    SSE_HEADERS,
    Stream,
    StreamKind,
    error_body,
    json_body,
    parse_event_id,
    priming_event,
    sse_event,
)
from checkpoint_mcp.refusals import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SESSION_NOT_FOUND,
    SPEC_PROTOCOL_ERRORS,
    TRANSPORT_ERROR,
)
from checkpoint_mcp.wire import PROTOCOL_VERSION_META, Kind, Message, WireParseError, classify

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

SESSION_ERA_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
SESSION_HEADER = b"mcp-session-id"
PRIMING_SINCE = "2025-11-25"  # the first protocol version whose clients take an event without data (SEP-1699)


def one_line(body: bytes) -> bytes:
    """The message as one stdio line: line breaks can only sit between JSON tokens, so they become spaces."""
    body = body.strip()
    if b"\n" in body or b"\r" in body:
        body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    return body + b"\n"


def _modern_status(line: bytes, body: Any = None) -> int:
    """The HTTP status of a 2026-07-28 JSON answer (``body``: the line parsed, if it was): 404 for an unknown
    method, 400 for a protocol error."""
    if body is None:
        try:
            body = classify(line).body
        except WireParseError:
            return 200
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if code == METHOD_NOT_FOUND:
        return 404
    if isinstance(code, int) and code in SPEC_PROTOCOL_ERRORS:
        return 400
    return 200


def _decoded(value: str) -> str:
    """A mirrored header's value, with the ``=?base64?…?=`` sentinel decoded."""
    if value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        import base64

        with contextlib.suppress(ValueError):
            return base64.b64decode(value[9:-2], validate=True).decode()
    return value


class _Refusal(Exception):
    """An HTTP error answer with a JSON-RPC error body."""

    def __init__(self, status: int, code: int, text: str, ident: Any = None) -> None:
        super().__init__(text)
        self.status = status
        self.code = code
        self.text = text
        self.ident = ident


class _Accepts:
    def __init__(self, scope: Scope) -> None:
        accept = (header(scope, b"accept") or "*/*").lower()
        anything = "*/*" in accept
        self.json = anything or "application/json" in accept or "application/*" in accept
        self.sse = anything or "text/event-stream" in accept or "text/*" in accept
        self.priming = False  # an SSE answer starts with a priming event (a session-era client of 2025-11-25+)


class McpEndpoint:
    """The ASGI app behind both MCP routes."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._counter = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        workflow = scope.get("path_params", {}).get("workflow") or self._gateway.default_workflow()
        if method == "POST":
            await self._post(scope, receive, send, workflow)
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            await self._delete(scope, send)
        else:
            body = error_body(TRANSPORT_ERROR, f"Method Not Allowed: {method}")
            await respond(send, 405, body, [(b"allow", b"GET, POST, DELETE")])

    # ---- POST ---------------------------------------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send, workflow: str) -> None:
        try:
            accepts, message, line = await self._read_post(scope, receive)
            session_id = header(scope, SESSION_HEADER)
            carrier = _trace_context(scope)
            era = "session" if session_id is not None or message.method == "initialize" else "2026"
            self._gateway.metrics.count_request(era)
            principal: str | None = scope.get(PRINCIPAL)
            if session_id is not None:
                session = self._gateway.session_of(session_id, principal)
                if session is None:
                    raise _Refusal(404, SESSION_NOT_FOUND, "Session not found", message.id)
                accepts.priming = _primes(header(scope, b"mcp-protocol-version"))
                await self._exchange(receive, send, session.channel, message, line, accepts, session, None, carrier)
            elif message.kind is Kind.REQUEST and message.method == "initialize":
                session = await self._opened(self._gateway.open_session(workflow, principal), message)
                extra = [(SESSION_HEADER, session.id.encode())]
                await self._exchange(receive, send, session.channel, message, line, accepts, session, extra, carrier)
            else:
                if not self._modern(scope, message):
                    text = "Bad Request: Mcp-Session-Id header is required (or use protocol 2026-07-28)"
                    raise _Refusal(400, TRANSPORT_ERROR, text, message.id)
                mismatch = self._header_mismatch(scope, message)
                if mismatch is not None:
                    raise _Refusal(400, HEADER_MISMATCH, mismatch, message.id)
                channel = await self._opened(self._gateway.workflow_channel(workflow, principal), message)
                await self._exchange(receive, send, channel, message, line, accepts, carrier=carrier)
        except _Refusal as refusal:
            await respond(send, refusal.status, error_body(refusal.code, refusal.text, refusal.ident))

    async def _read_post(self, scope: Scope, receive: Receive) -> tuple[_Accepts, Message, bytes]:
        """The POST's message, or the refusal of a POST that cannot carry one.

        Raises:
            _Refusal: draining, wrong media types, a body that is not one JSON-RPC message.
        """
        if self._gateway.draining:
            raise _Refusal(503, TRANSPORT_ERROR, "Service Unavailable: the gateway is shutting down")
        content_type = (header(scope, b"content-type") or "").lower()
        if not content_type.startswith("application/json"):
            raise _Refusal(415, TRANSPORT_ERROR, "Unsupported Media Type: send Content-Type: application/json")
        accepts = _Accepts(scope)
        if not accepts.json and not accepts.sse:
            raise _Refusal(406, TRANSPORT_ERROR, "Not Acceptable: accept application/json and text/event-stream")
        body = await _read_body(receive)
        try:
            message = classify(body)
        except WireParseError as exc:
            raise _Refusal(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if message.kind is Kind.BATCH:
            raise _Refusal(400, INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported")
        if message.kind is Kind.OTHER and not message.has_id:
            raise _Refusal(400, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
        return accepts, message, one_line(body)

    async def _opened(self, opening: Awaitable[_T], message: Message) -> _T:
        """Await a session or channel being opened, turning a failure into the request's refusal.

        Raises:
            _Refusal: the workflow is owned elsewhere (409), the journal fails (503), the upstream cannot start (502).
        """
        try:
            return await opening
        except WorkflowOwned as exc:
            raise _Refusal(409, INTERNAL_ERROR, str(exc), message.id) from None
        except WorkflowOfAnother as exc:
            logger.warning("refused a request: %s", exc)
            raise _Refusal(403, INTERNAL_ERROR, "Forbidden: this workflow is not yours", message.id) from None
        except JournalError as exc:
            logger.error("cannot serve a request: %s", exc)
            raise _Refusal(503, INTERNAL_ERROR, str(exc), message.id) from None
        except (CheckpointError, OSError) as exc:
            logger.error("cannot start the upstream: %s", exc)
            raise _Refusal(502, INTERNAL_ERROR, f"cannot start the upstream: {exc}", message.id) from None

    @staticmethod
    def _modern(scope: Scope, message: Message) -> bool:
        version = header(scope, b"mcp-protocol-version")
        if version is not None:
            return version not in SESSION_ERA_VERSIONS
        params = message.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        return isinstance(meta, dict) and PROTOCOL_VERSION_META in meta

    @staticmethod
    def _header_mismatch(scope: Scope, message: Message) -> str | None:
        """Why the mirrored headers disagree with the body (2026-07-28 servers must refuse that), or None."""
        params: dict[str, Any] = message.params if isinstance(message.params, dict) else {}
        raw_meta = params.get("_meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        version = header(scope, b"mcp-protocol-version")
        if version is None:
            return "Header mismatch: the MCP-Protocol-Version header is required"
        if PROTOCOL_VERSION_META in meta and meta[PROTOCOL_VERSION_META] != version:
            body = meta[PROTOCOL_VERSION_META]
            return f"Header mismatch: MCP-Protocol-Version {version!r} does not match the body's {body!r}"
        method = header(scope, b"mcp-method")
        if method is not None and message.method is not None and method != message.method:
            return f"Header mismatch: Mcp-Method header value {method!r} does not match body value {message.method!r}"
        name = header(scope, b"mcp-name")
        field = NAMED_METHODS.get(message.method or "")
        if name is not None and field is not None and _decoded(name) != params.get(field):
            return f"Header mismatch: Mcp-Name header value {_decoded(name)!r} does not match the body's {field}"
        return None

    async def _exchange(
        self,
        receive: Receive,
        send: Send,
        channel: Backend,
        message: Message,
        line: bytes,
        accepts: _Accepts,
        session: Session | None = None,
        extra: list[tuple[bytes, bytes]] | None = None,
        carrier: dict[str, str] | None = None,
    ) -> None:
        if message.kind is not Kind.REQUEST:
            channel.submit(message, line, None)
            await send({"type": "http.response.start", "status": 202, "headers": list(extra or [])})
            await send({"type": "http.response.body", "body": b""})
            return
        if session is not None:
            stream = session.new_stream(message.method)
        else:
            self._counter += 1
            kind = StreamKind.LISTEN if message.method == "subscriptions/listen" else StreamKind.REQUEST
            stream = Stream(f"r{self._counter}", kind, message.method)
        channel.submit(message, line, stream, carrier)
        disconnected = asyncio.ensure_future(_disconnect(receive))
        try:
            await self._answer(send, stream, accepts, disconnected, extra or [], resumable=session is not None)
        finally:
            disconnected.cancel()
        if not stream.finished and session is None:
            channel.cancel(stream, "the client closed the response stream")

    async def _answer(
        self,
        send: Send,
        stream: Stream,
        accepts: _Accepts,
        disconnected: asyncio.Future[None],
        extra: list[tuple[bytes, bytes]],
        *,
        resumable: bool,
    ) -> None:
        """SSE at once in the session era (when accepted); else JSON if the response comes first (or SSE is not
        accepted), and an SSE stream from the first line if something else does."""
        stream.attached += 1
        try:
            if resumable and accepts.sse:
                await _stream_sse(send, stream, 0, disconnected, extra, resumable=True, priming=accepts.priming)
                return
            first = asyncio.ensure_future(stream.wait_beyond(0))
            await asyncio.wait({first, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            first.cancel()
            if disconnected.done():
                return
            while not accepts.sse and not stream.finished:
                final = asyncio.ensure_future(stream.wait_beyond(stream.end))
                await asyncio.wait({final, disconnected}, return_when=asyncio.FIRST_COMPLETED)
                final.cancel()
                if disconnected.done():
                    return
            if stream.finished and not stream.lines:  # closed under it (shutdown, DELETE) with nothing to say
                await respond(
                    send, 503, error_body(TRANSPORT_ERROR, "Service Unavailable: the session was closed"), extra
                )
                return
            if accepts.json and (not accepts.sse or (stream.finished and len(stream.lines) == 1)):
                answer = stream.lines[-1]
                status = 200 if resumable else _modern_status(answer, stream.answer)
                await respond(send, status, json_body(answer), extra)
                return
            await _stream_sse(send, stream, 0, disconnected, extra, resumable=resumable)
        finally:
            stream.attached -= 1

    # ---- GET and DELETE -----------------------------------------------------------------------------------

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = header(scope, SESSION_HEADER)
        if session_id is None:
            body = error_body(
                TRANSPORT_ERROR, "Method Not Allowed: GET needs an Mcp-Session-Id (2026-07-28 has no GET stream)"
            )
            await respond(send, 405, body, [(b"allow", b"POST")])
            return
        if not _Accepts(scope).sse:
            await respond(send, 406, error_body(TRANSPORT_ERROR, "Not Acceptable: a GET stream is text/event-stream"))
            return
        session = self._gateway.session_of(session_id, scope.get(PRINCIPAL))
        if session is None:
            await respond(send, 404, error_body(SESSION_NOT_FOUND, "Session not found"))
            return
        session.channel.last_active = time.monotonic()
        stream, start = session.standalone, session.standalone_sent
        last = header(scope, b"last-event-id")
        resumed = parse_event_id(last) if last else None
        if resumed is not None and resumed[0] in session.streams:
            stream, start = session.streams[resumed[0]], resumed[1] + 1
        if stream.attached and stream is session.standalone:
            await respond(send, 409, error_body(TRANSPORT_ERROR, "Conflict: only one GET stream per session"))
            return
        if self._gateway.draining:
            await respond(send, 503, error_body(TRANSPORT_ERROR, "Service Unavailable: the gateway is shutting down"))
            return
        disconnected = asyncio.ensure_future(_disconnect(receive))
        stream.attached += 1
        try:
            sent = await _stream_sse(send, stream, start, disconnected, [], resumable=True)
            if stream is session.standalone:
                session.standalone_sent = max(session.standalone_sent, sent)
        finally:
            stream.attached -= 1
            disconnected.cancel()

    async def _delete(self, scope: Scope, send: Send) -> None:
        session_id = header(scope, SESSION_HEADER)
        if session_id is None:
            await respond(send, 405, error_body(TRANSPORT_ERROR, "Method Not Allowed: DELETE needs an Mcp-Session-Id"))
            return
        if self._gateway.session_of(session_id, scope.get(PRINCIPAL)) is None or not await self._gateway.close_session(
            session_id, "closed by the client (DELETE)"
        ):
            await respond(send, 404, error_body(SESSION_NOT_FOUND, "Session not found"))
            return
        await respond(send, 200, b"{}")


def _primes(version: str | None) -> bool:
    """Whether a session-era client that sent ``version`` takes a priming event (older ones cannot parse it)."""
    return version is not None and version[:4].isdigit() and version >= PRIMING_SINCE


def _trace_context(scope: Scope) -> dict[str, str] | None:
    """The request's W3C trace-context headers (``traceparent``, ``tracestate``), if it has them."""
    parent = header(scope, b"traceparent")
    if parent is None:
        return None
    state = header(scope, b"tracestate")
    return {"traceparent": parent, **({"tracestate": state} if state is not None else {})}


async def _read_body(receive: Receive) -> bytes:
    """The whole request body (empty if the client left)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnect(receive: Receive) -> None:
    """Return when the client goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def _stream_sse(
    send: Send,
    stream: Stream,
    start: int,
    disconnected: asyncio.Future[None],
    extra: list[tuple[bytes, bytes]],
    *,
    resumable: bool,
    priming: bool = False,
) -> int:
    """Send the stream's lines from ``start`` as SSE events until it finishes or the client leaves; how far it got.

    ``priming`` sends first an event with the id before ``start`` and no data, so the client can resume from it.
    """
    headers = [(b"content-type", b"text/event-stream"), *((k.encode(), v.encode()) for k, v in SSE_HEADERS.items())]
    await send({"type": "http.response.start", "status": 200, "headers": headers + extra})
    if priming:
        await send({"type": "http.response.body", "body": priming_event(stream.event_id(start - 1)), "more_body": True})
    position = start
    with contextlib.suppress(OSError):
        while True:
            position = max(position, stream.base)  # what was forgotten cannot be resumed
            while position < stream.end:
                line = stream.line_at(position)
                assert line is not None
                event_id = stream.event_id(position) if resumable else None
                position += 1
                await send({"type": "http.response.body", "body": sse_event(line, event_id), "more_body": True})
            if stream.finished or disconnected.done():
                break
            more = asyncio.ensure_future(stream.wait_beyond(position))
            await asyncio.wait({more, disconnected}, return_when=asyncio.FIRST_COMPLETED)
            more.cancel()
        if not disconnected.done():
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    return position
