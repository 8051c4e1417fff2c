"""The deprecated 2024-11-05 HTTP+SSE transport, for servers that refuse the Streamable HTTP ``initialize`` POST.

One GET opens the event stream; its first event, ``endpoint``, says where to POST. Every message from the server,
answers included, comes on that stream; a POST only says whether the message was taken. The stream is the
session: when it breaks, every request waiting on it is abandoned (in doubt), and the next message from the
client opens a new stream and session with the client's own ``initialize``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol
from urllib.parse import urljoin

from checkpoint_mcp.refusals import UpstreamRefused
from checkpoint_mcp.upstream.base import UpstreamSink
from checkpoint_mcp.upstream.http.client import ConnectFailed, HttpClient, HttpError, Response
from checkpoint_mcp.upstream.http.exchange import (
    NOT_RUN_STATUSES,
    Deadlines,
    Lost,
    Refused,
    content_type,
    describe,
    response_key,
    send_and_read,
)
from checkpoint_mcp.upstream.http.headers import OutgoingMessage
from checkpoint_mcp.upstream.http.sse import EventParser, EventTooLarge, to_line
from checkpoint_mcp.wire import Kind, error_line

logger = logging.getLogger(__name__)


class StreamOwner(Protocol):
    """What the legacy stream needs of the upstream that owns it (``remote.RemoteUpstream``): its exchanges,
    deadlines, tasks and sink. A protocol, so that the two modules do not import each other."""

    @property
    def sink(self) -> UpstreamSink: ...

    @property
    def deadlines(self) -> Deadlines: ...

    async def open_exchange(
        self, method: str, message: OutgoingMessage | None, headers: dict[str, str]
    ) -> Response: ...

    async def deliver(self, lines: list[bytes], message: OutgoingMessage | None = None) -> None: ...

    def spawn(self, coroutine: Any) -> asyncio.Task[None]: ...

    def stream_lost(self) -> None: ...

    def trace_context(self, message: OutgoingMessage) -> dict[str, str]: ...


class LegacyStream:
    """The 2024-11-05 transport: one event stream for every message from the server, POSTs to its endpoint."""

    def __init__(self, upstream: StreamOwner, client: HttpClient, url: str) -> None:
        self._upstream = upstream
        self._client = client
        self._url = url
        self._endpoint: str | None = None
        self._response: Response | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[tuple[str, Any], OutgoingMessage] = {}
        self._ours: dict[tuple[str, Any], asyncio.Future[None]] = {}  # answers to our own initialize

    async def connect(self) -> bool:
        """Open the stream and read its ``endpoint`` event; False if the server does not answer that way."""
        upstream = self._upstream
        try:
            response = await upstream.open_exchange("GET", None, {"accept": "text/event-stream"})
        except (Refused, Lost):
            return False
        if response.status_code != 200 or content_type(response) != "text/event-stream":
            await response.aclose()
            return False
        parser = EventParser()
        chunks = response.aiter_bytes()
        try:
            async with upstream.deadlines.bounded():
                while self._endpoint is None:
                    for event in parser.feed(await anext(chunks)):
                        if event.event == "endpoint":
                            endpoint = event.data.decode("utf-8", "replace").strip()
                            self._endpoint = urljoin(self._url, endpoint)
                            break
        except (StopAsyncIteration, TimeoutError, HttpError, EventTooLarge):
            await response.aclose()
            return False
        self._response = response
        self._reader = upstream.spawn(self._read(parser, chunks))
        return True

    async def reopen(self, initialize: OutgoingMessage, initialized: OutgoingMessage | None) -> bool:
        """A new stream and session, begun with the client's own initialize (its answer is ours); True if so."""
        if not await self.connect():
            logger.warning("could not reopen the event stream of the remote upstream")
            return False
        assert initialize.key is not None
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ours[initialize.key] = answered
        try:
            await self.post(initialize, waits=False)
            async with asyncio.timeout(self._upstream.deadlines.seconds):
                await answered
        except TimeoutError:
            logger.warning("the remote upstream did not answer a new initialize")
            return False
        finally:
            self._ours.pop(initialize.key, None)
        if initialized is not None:
            await self.post(initialized)
        logger.info("started a new session with the remote upstream (HTTP+SSE)")
        return True

    async def post(self, message: OutgoingMessage, *, waits: bool = True) -> None:
        """POST one message to the endpoint; a request's answer comes on the stream."""
        upstream = self._upstream
        if self._endpoint is None and not await self.connect():
            if message.kind is Kind.REQUEST:
                refusal = UpstreamRefused(status=None, reason="the event stream could not be reopened", method=None)
                await upstream.deliver([error_line(message.ident, refusal.to_error())])
            return
        assert self._endpoint is not None
        if waits and message.kind is Kind.REQUEST and message.key is not None:
            self._waiting[message.key] = message
        try:
            async with upstream.deadlines.bounded():
                headers = {"content-type": "application/json", **upstream.trace_context(message)}
                status = await send_and_read(self._client, "POST", self._endpoint, headers, message.body)
        except ConnectFailed as exc:
            self._answer_refused(message, None, describe(exc))
            return
        except (HttpError, TimeoutError) as exc:
            self._abandon(message, describe(exc) or "no response to the POST")
            return
        if status >= 400:
            if status in NOT_RUN_STATUSES:
                self._answer_refused(message, status, NOT_RUN_STATUSES[status])
            else:
                self._abandon(message, f"HTTP {status}")

    def _answer_refused(self, message: OutgoingMessage, status: int | None, reason: str) -> None:
        if message.kind is Kind.REQUEST and message.key is not None:
            self._waiting.pop(message.key, None)
            refusal = UpstreamRefused(status=status, reason=reason, method=message.method)
            self._upstream.sink.upstream_lines([error_line(message.ident, refusal.to_error())])

    def _abandon(self, message: OutgoingMessage, reason: str) -> None:
        if message.kind is Kind.REQUEST and message.key is not None:
            self._waiting.pop(message.key, None)
            self._upstream.sink.request_abandoned(message.ident, reason)

    async def _read(self, parser: EventParser, chunks: Any) -> None:
        upstream = self._upstream
        try:
            async for chunk in chunks:
                for event in parser.feed(chunk):
                    line = to_line(event.data) if event.event == "message" else b""
                    if not line:
                        continue
                    key = response_key(line)
                    ours = self._ours.get(key) if key is not None else None
                    if ours is not None:
                        if not ours.done():
                            ours.set_result(None)
                        continue
                    message = self._waiting.pop(key, None) if key is not None else None
                    await upstream.deliver([line], message)
        except (HttpError, EventTooLarge) as exc:
            logger.warning("the event stream of the remote upstream broke: %s", describe(exc))
        finally:
            self._lost()

    def _lost(self) -> None:
        """The stream is gone: its session with it. Requests waiting on it will get no answer."""
        self._endpoint = None
        waiting, self._waiting = self._waiting, {}
        for message in waiting.values():
            self._upstream.sink.request_abandoned(message.ident, "the event stream closed before the answer")
        self._upstream.stream_lost()

    def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
