"""A remote upstream: the MCP server at ``--upstream-url``, over Streamable HTTP (both eras) or HTTP+SSE.

The relay hands this upstream complete JSON-RPC lines from its stdio client; each one becomes the body of a POST,
byte for byte, and whatever the server sends back (a JSON body, the ``data`` of an SSE event on the request's
stream or on the GET stream) goes to the client as one line, byte for byte (``sse.to_line``). It makes no
journaling decision: it tells the sink what the server answered, or that a request will get no answer
(``request_abandoned``: its exchange broke, so a journaled call stays in doubt), or answers a request itself with
``UpstreamRefused`` when the HTTP status proves the server did not run it. It sends a request again only when a
404 for its session proved the server did not run it, once, in a new session (see below).

Which transport, as the MCP specification's backwards-compatibility sections say:

* **2026-07-28** (a request whose ``_meta`` names that version): stateless; one POST per request with
  ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers; cancelling closes the request's stream.
* **2025-03-26 … 2025-11-25** (the ``initialize`` handshake): the session id the server gave to ``initialize``
  goes on every later request, the negotiated version too; a GET stream carries server-initiated messages; a
  request stream that ends early is resumed with ``Last-Event-ID`` when the server numbered its events; DELETE
  ends it at shutdown. A 404 for the session means the server forgot it: a new session stands in for it, unseen
  by the client, and the request that met the 404 goes again there, once (``renewal.py`` says how).
* **2024-11-05 HTTP+SSE**, when the server refuses the ``initialize`` POST with a 4xx that is not an answer:
  a GET opens the event stream, whose ``endpoint`` event says where to POST; every answer comes on that stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from checkpoint_mcp.config import RemoteConfig
from checkpoint_mcp.refusals import UpstreamRefused
from checkpoint_mcp.upstream.base import UpstreamSink
from checkpoint_mcp.upstream.http.client import Broken, ConnectFailed, HttpError, Response, open_client
from checkpoint_mcp.upstream.http.exchange import (
    ERROR_BODY_LIMIT,
    NOT_RUN_STATUSES,
    Deadlines,
    Lost,
    Refused,
    content_type,
    describe,
    jsonrpc_error,
    read_answer,
    read_body,
    response_key,
    send_and_read,
)
from checkpoint_mcp.upstream.http.headers import McpHeaders, OutgoingMessage, read_outgoing
from checkpoint_mcp.upstream.http.http_sse import LegacyStream
from checkpoint_mcp.upstream.http.renewal import Expired, Renewal
from checkpoint_mcp.upstream.http.sse import EventParser, EventTooLarge, to_line
from checkpoint_mcp.wire import Kind, WireParseError, error_line, id_key

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
DEFAULT_RETRY_SECONDS = 1.0  # between reconnections of an event stream when the server names no `retry`
RESUME_ATTEMPTS = 3  # GETs with Last-Event-ID for one request stream before it counts as broken
LISTEN_FAILURES = 3  # consecutive failures of the GET stream before it is given up (until the next session)
MAX_CONNECTIONS = 64  # to the server at once; requests beyond wait for one (``--upstream-timeout`` applies)


class _Stream(NamedTuple):
    """Where a request stream ended: the last event id seen and the server's retry delay."""

    answered: bool
    last_id: str | None
    retry: float


class RemoteUpstream:
    """The upstream at a URL, behind the same interface as a child process (see ``upstream/base.py``)."""

    def __init__(
        self,
        config: RemoteConfig,
        headers: dict[str, str],
        context: ssl.SSLContext,
        auth: httpx2.Auth | None = None,
        deadlines: Deadlines | None = None,
    ) -> None:
        self._config = config
        self._url = config.url
        self._timeout = config.timeout
        self._deadlines = deadlines or Deadlines(config.timeout)
        self._authorizes = auth is not None
        # Keep as many connections alive as may be in use at once: reconnecting per request costs more.
        self._client = open_client(headers, context, config.timeout, MAX_CONNECTIONS, auth)
        self._sink: UpstreamSink | None = None
        self._mcp = McpHeaders()
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        # Keyed by ``id_key``; None (no valid id) matches nothing the interceptor let through.
        self._exchanges: dict[tuple[str, Any] | None, tuple[asyncio.Task[None], OutgoingMessage]] = {}
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._session: str | None = None
        self._expired = False  # the server forgot our session: start a new one before the next message
        self._renewal = Renewal(self._new_session)
        self._memory = self._renewal.memory  # the client's handshake and session state, for a new session
        self._listener: asyncio.Task[None] | None = None
        self._legacy: LegacyStream | None = None
        self._closing = False
        self._ended = asyncio.Event()
        self.request_headers: Callable[[tuple[str, Any] | None], dict[str, str]] | None = None
        """Headers for a request's POST, by its ``id_key`` (telemetry's ``traceparent``, a tool policy's
        idempotency key): headers, so the request's bytes stay verbatim."""

    # ---- the Upstream interface ------------------------------------------------------------------------------

    async def start(self, sink: UpstreamSink) -> None:
        """Begin relaying; nothing is sent to the server before the client's first message."""
        self._sink = sink
        self.spawn(self._write_loop())

    def send(self, data: bytes) -> None:
        """Queue complete lines from the client, in order."""
        for line in data.splitlines(keepends=True):
            if line.strip():
                self._outbox.put_nowait(line)

    def pause_reading(self, paused: bool) -> None:
        """Stop (or resume) delivering the server's messages while the client is not reading ours."""
        if paused:
            self._flowing.clear()
        else:
            self._flowing.set()

    async def died(self) -> str:
        """Clean up after ``upstream_closed``; how it ended."""
        await self.shutdown()
        return "the remote upstream closed"

    async def shutdown(self) -> str:
        """End the session (DELETE, bounded) and drop every connection; how it ended."""
        if self._closing:
            await self._ended.wait()
            return "closed the connection"
        self._closing = True
        self._cancel_all()
        if self._session is not None:
            with contextlib.suppress(HttpError, TimeoutError):
                async with asyncio.timeout(min(self._timeout, 5.0)):
                    status = await send_and_read(self._client, "DELETE", self._url, self._session_headers(), None)
                    logger.debug("DELETE of the session: HTTP %d", status)
        with contextlib.suppress(Exception):
            await self._client.aclose()
        self._ended.set()
        return "closed the connection"

    def kill(self) -> None:
        """Drop every exchange at once."""
        self._closing = True
        self._cancel_all()
        self._ended.set()

    # ---- the client's messages, in order -------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            line = await self._outbox.get()
            try:
                message = read_outgoing(line)
            except WireParseError:
                logger.warning("a line from the client that is not JSON was not sent to the remote upstream")
                continue
            try:
                await self._dispatch(line, message)
            except Exception:
                # A bug of ours must not stop the relay, nor leave a request unanswered (it may have been sent).
                logger.exception("internal error while sending a %s to the remote upstream", message.label)
                if message.kind is Kind.REQUEST and self._sink is not None:
                    self._sink.request_abandoned(message.ident, "internal error in checkpoint")

    async def _dispatch(self, line: bytes, message: OutgoingMessage) -> None:
        """Send one message from the client: a request in an exchange of its own, anything else in order."""
        await self._renewal.settled()  # a new session is being started: nothing goes out in between
        if self._expired:
            failure = await self._renew(self._renewal.generation)
            if failure is not None and self._legacy is None:
                if message.kind is Kind.REQUEST:
                    refusal = UpstreamRefused(status=404, reason=failure, method=message.method)
                    await self.deliver([error_line(message.ident, refusal.to_error())])
                else:
                    logger.warning("a %s was not sent: %s", message.label, failure)
                return
        self._memory.saw_sent(line, message)
        if self._legacy is not None:
            await self._legacy.post(message)
        elif message.kind is Kind.REQUEST:
            task = self.spawn(self._exchange(message))
            assert message.key is not None
            self._exchanges[message.key] = (task, message)
        elif message.method == "notifications/cancelled" and self._cancel_modern(message):
            return
        else:
            await self._post_other(message)

    def _cancel_modern(self, message: OutgoingMessage) -> bool:
        """Cancel a 2026-07-28 request by closing its stream (that era has no client notifications); True if so."""
        params = message.params
        if not isinstance(params, dict) or "requestId" not in params:
            return False
        found = self._exchanges.get(id_key(params["requestId"]))
        if found is None or found[1].version is None:
            return False
        found[0].cancel()
        return True

    async def _post_other(self, message: OutgoingMessage, *, renewable: bool = True) -> None:
        """A notification or a response to the server's request: POST it, learn nothing but a lost session.

        A notification that meets a 404 for the session was not taken: it goes again, once, in a new session.
        """
        generation = self._renewal.generation
        headers = self._headers_for(message)
        try:
            async with self._deadlines.bounded():
                status = await send_and_read(self._client, "POST", self._url, headers, message.body)
        except (HttpError, TimeoutError) as exc:
            logger.warning("could not send a %s to the remote upstream: %s", message.label, describe(exc))
            return
        if status == 404 and SESSION_HEADER in headers:
            self._session_lost(generation)
            if message.kind is not Kind.NOTIFICATION:
                logger.warning("a %s met the expired session: what it answered went with the session", message.label)
            elif renewable and message.method != "notifications/initialized" and await self._renew(generation) is None:
                await self._post_other(message, renewable=False)  # (a new session sends its own initialized)
        elif status >= 400:
            logger.warning("the remote upstream refused a %s: HTTP %d", message.label, status)
        elif message.method == "notifications/initialized" and self._session is not None:
            self._listen()

    # ---- one request, one exchange -------------------------------------------------------------------------

    async def _exchange(self, message: OutgoingMessage) -> None:
        sink = self._sink
        assert sink is not None
        try:
            try:
                await self._answer(message)
            except Expired as expired:
                failure = await self._renew(expired.generation)
                if failure is not None:
                    raise Refused(404, failure) from None
                logger.warning("sending the %s that met the expired session again, in the new one", message.label)
                await self._answer(message, renewable=False)
        except Refused as refused:
            refusal = UpstreamRefused(status=refused.status, reason=refused.reason, method=message.method)
            await self.deliver([error_line(message.ident, refusal.to_error())])
        except Lost as lost:
            logger.warning("the exchange of a %s broke: %s", message.label, lost)
            sink.request_abandoned(message.ident, str(lost))
        except asyncio.CancelledError:
            logger.debug("the exchange of a %s was cancelled", message.label)
        except Exception:
            # A bug of ours: the request may have reached the server, so it is in doubt, and it gets an answer.
            logger.exception("internal error in the exchange of a %s", message.label)
            sink.request_abandoned(message.ident, "internal error in checkpoint")
        finally:
            assert message.key is not None
            found = self._exchanges.get(message.key)
            if found is not None and found[0] is asyncio.current_task():
                del self._exchanges[message.key]

    async def _answer(self, message: OutgoingMessage, *, renewable: bool = True) -> None:
        """POST a request and deliver its answer.

        Raises:
            Expired: the server forgot the session (so it did not run the request); only if ``renewable``.
            Refused: the server certainly did not run it.
            Lost: no answer will come and the server may have run it.
        """
        headers = self._headers_for(message)
        generation = self._renewal.generation if SESSION_HEADER in headers else None
        response = await self.open_exchange("POST", message, headers)
        try:
            status = response.status_code
            if message.method == "initialize" and 200 <= status < 300:
                self._session = response.headers.get(SESSION_HEADER) or None
                self._expired = False
            if status >= 300:
                await self._failed(message, response, generation if renewable else None)
                return
            kind = content_type(response)
            if kind == "application/json":
                body = await read_body(response)
                line = to_line(body)
                if not line:
                    raise Lost(f"HTTP {status} with an empty body")
                await self.deliver([line], message)
            elif kind == "text/event-stream":
                stream = await self._read_events(response, message)
                if not stream.answered:
                    await self._resume(message, stream)
            else:
                raise Lost(f"HTTP {status} with no response to the request ({kind or 'no body'})")
        finally:
            await response.aclose()

    async def open_exchange(self, method: str, message: OutgoingMessage | None, headers: dict[str, str]) -> Response:
        """Send one request and wait (bounded) for its response to start.

        Raises:
            Refused: the connection could not be made (nothing was sent).
            Lost: it broke or timed out after the request may have been sent.
        """
        content = message.body if message is not None else None
        try:
            async with self._deadlines.bounded():
                return await self._client.send(method, self._url, headers, content)
        except ConnectFailed as exc:
            raise Refused(None, f"cannot connect to {self._url}: {describe(exc)}") from exc
        except TimeoutError as exc:
            raise Lost(f"no response within {self._timeout:g}s") from exc
        except Broken as exc:
            raise Lost(describe(exc)) from exc
        except Exception as exc:
            if not self._authorizes:
                raise
            # The OAuth flow failed (its errors are the SDK's own): the request never went out with a token,
            # so the server did not run it.
            raise Refused(None, f"authorization failed: {describe(exc)}") from exc

    async def _failed(self, message: OutgoingMessage, response: Response, generation: int | None) -> None:
        """A status of 300 or more: the server's JSON-RPC answer, a refusal, or a broken exchange.

        Raises:
            Expired: a 404 for the session the request was sent in (``generation``, None if none or if the
                request was already sent again once).
            Refused: the status proves the request did not run.
            Lost: it may have run.
        """
        status = response.status_code
        if status == 404 and generation is not None and message.method != "initialize":
            self._session_lost(generation)
            raise Expired(generation)
        with contextlib.suppress(Lost):
            answer = jsonrpc_error(await read_body(response, ERROR_BODY_LIMIT), message)
            if answer is not None:
                await self.deliver([answer], message)
                return
        legacy_hint = message.method == "initialize" and 400 <= status < 500 and status not in (401, 403)
        if legacy_hint and await self._try_legacy(message):
            return
        if status in NOT_RUN_STATUSES:
            raise Refused(status, NOT_RUN_STATUSES[status])
        if 300 <= status < 400:
            raise Refused(status, f"redirect to {response.headers.get('location', '?')} not followed")
        raise Lost(f"HTTP {status}")

    async def _read_events(self, response: Response, message: OutgoingMessage) -> _Stream:
        """Deliver the events of a request's stream until its answer; where it ended."""
        parser = EventParser()
        last_id: str | None = None
        retry = DEFAULT_RETRY_SECONDS
        try:
            async for chunk in response.aiter_bytes():
                for event in parser.feed(chunk):
                    last_id = event.id or last_id
                    retry = event.retry / 1000 if event.retry is not None else retry
                    line = to_line(event.data) if event.event == "message" else b""
                    if line:
                        await self.deliver([line], message)
                        if _answers(line, message):
                            return _Stream(True, last_id, retry)
        except (HttpError, EventTooLarge) as exc:
            logger.info("the stream of a %s broke: %s", message.label, describe(exc))
        return _Stream(False, last_id, retry)

    async def _resume(self, message: OutgoingMessage, stream: _Stream) -> None:
        """Resume a request stream that ended early with GETs carrying ``Last-Event-ID``, where the server
        numbered its events (a session); never by sending the request again.

        Raises:
            Lost: it cannot be resumed.
        """
        if stream.last_id is None or self._session is None or message.version is not None:
            raise Lost("the stream ended without a response")
        for _ in range(RESUME_ATTEMPTS):
            await asyncio.sleep(stream.retry)
            headers = {**self._session_headers(), "accept": "text/event-stream", "last-event-id": stream.last_id}
            try:
                response = await self.open_exchange("GET", None, headers)
            except (Refused, Lost) as exc:
                logger.info("resuming the stream of a %s failed: %s", message.label, exc)
                continue
            try:
                if response.status_code >= 300 or content_type(response) != "text/event-stream":
                    raise Lost(f"the stream ended without a response; resuming it got HTTP {response.status_code}")
                resumed = await self._read_events(response, message)
            finally:
                await response.aclose()
            if resumed.answered:
                return
            stream = _Stream(False, resumed.last_id or stream.last_id, resumed.retry)
        raise Lost("the stream ended without a response, and resuming it failed")

    async def deliver(self, lines: list[bytes], message: OutgoingMessage | None = None) -> None:
        """Hand the server's lines to the sink (once the client reads again), learning from answers to ``message``."""
        await self._flowing.wait()
        if message is not None:
            for line in lines:
                self._mcp.learn(message, line)
                self._memory.learn(message, line)
        assert self._sink is not None
        self._sink.upstream_lines(lines)

    # ---- sessions ------------------------------------------------------------------------------------------

    def _headers_for(self, message: OutgoingMessage) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if message.method != "initialize":
            headers.update(self._session_headers())
        headers.update(self._mcp.for_message(message))
        headers.update(self.trace_context(message))
        return headers

    def trace_context(self, message: OutgoingMessage) -> dict[str, str]:
        """This request's own headers (``request_headers``: a ``traceparent``, an idempotency key), else nothing."""
        if self.request_headers is None or message.key is None:
            return {}
        return self.request_headers(message.key)

    def _session_headers(self) -> dict[str, str]:
        headers = self._mcp.version_header()
        if self._session is not None:
            headers[SESSION_HEADER] = self._session
        return headers

    def _session_lost(self, generation: int) -> None:
        """The server forgot session ``generation``: the next message (or the exchange that learned it) starts
        a new one. News of an older session than the current one changes nothing."""
        if generation != self._renewal.generation:
            return
        if self._session is not None:
            logger.warning("the remote upstream forgot our session (HTTP 404)")
        self._session = None
        self._expired = self._memory.initialize is not None
        if self._listener is not None:
            self._listener.cancel()
            self._listener = None

    async def _renew(self, generation: int) -> str | None:
        """A new session in place of session ``generation`` (once for all who found it gone); None, or why not."""
        self._expired = False
        failure = await self._renewal.renew(generation)
        if failure is not None:
            self._expired = self._memory.initialize is not None  # the next message tries again
        return failure

    async def _new_session(self) -> str | None:
        """Start a new session with the client's own initialize and initialized messages (their answers are
        ours: the client has its own), then restore the state the client had set up; None, or why it failed."""
        memory = self._memory
        if memory.initialize is None:
            return "the session expired before the client initialized it"
        message = read_outgoing(memory.initialize)
        if self._legacy is not None:
            initialized = read_outgoing(memory.initialized) if memory.initialized is not None else None
            return None if await self._legacy.reopen(message, initialized) else "the event stream could not reopen"
        try:
            answer = await self._own_request(message)
        except (Refused, Lost) as exc:
            self._session = None
            return f"the server forgot our session and refused a new one: {exc}"
        refusal = memory.version_refusal(answer)
        if refusal is not None:
            self._session = None
            return refusal
        if memory.initialized is not None:
            await self._post_other(read_outgoing(memory.initialized), renewable=False)
        await self._renewal.restore(self._own_request)
        return None

    async def _own_request(self, message: OutgoingMessage) -> bytes:
        """POST a request of the proxy's own in the current session; its answer (never the client's).

        Raises:
            Refused: a failure status without a JSON-RPC answer, or no connection.
            Lost: the exchange broke before its answer.
        """
        response = await self.open_exchange("POST", message, self._headers_for(message))
        try:
            if response.status_code >= 300:
                answer = jsonrpc_error(await read_body(response, ERROR_BODY_LIMIT), message)
                if answer is None:
                    raise Refused(response.status_code, f"HTTP {response.status_code}")
                return answer
            if message.method == "initialize":
                self._session = response.headers.get(SESSION_HEADER) or None
            return await read_answer(response, message, self._deadlines)
        finally:
            await response.aclose()

    def _listen(self) -> None:
        """Open the GET stream for the server's own messages (once per session)."""
        if self._listener is None and self._session is not None and not self._closing:
            self._listener = self.spawn(self._listen_loop(self._session))

    async def _listen_loop(self, session: str) -> None:
        last_id: str | None = None
        retry = DEFAULT_RETRY_SECONDS
        failures = 0
        while self._session == session and failures < LISTEN_FAILURES:
            headers = {**self._session_headers(), "accept": "text/event-stream"}
            if last_id is not None:
                headers["last-event-id"] = last_id
            try:
                response = await self.open_exchange("GET", None, headers)
            except (Refused, Lost) as exc:
                failures += 1
                logger.debug("the GET stream failed: %s", exc)
                await asyncio.sleep(retry)
                continue
            try:
                if response.status_code == 405:
                    logger.debug("the remote upstream offers no GET stream")
                    return
                if response.status_code == 404:
                    if self._session == session:
                        self._session_lost(self._renewal.generation)
                    return
                if response.status_code >= 300 or content_type(response) != "text/event-stream":
                    failures += 1
                else:
                    failures = 0
                    parser = EventParser()
                    with contextlib.suppress(HttpError, EventTooLarge):
                        async for chunk in response.aiter_bytes():
                            for event in parser.feed(chunk):
                                last_id = event.id or last_id
                                retry = event.retry / 1000 if event.retry is not None else retry
                                line = to_line(event.data) if event.event == "message" else b""
                                if line:
                                    await self.deliver([line])
            finally:
                await response.aclose()
            await asyncio.sleep(retry)

    # ---- the 2024-11-05 HTTP+SSE transport -----------------------------------------------------------------

    async def _try_legacy(self, message: OutgoingMessage) -> bool:
        """Fall back to HTTP+SSE after the server refused the initialize POST; True if it answered that way."""
        legacy = LegacyStream(self, self._client, self._url)
        if not await legacy.connect():
            return False
        logger.info("the remote upstream speaks the 2024-11-05 HTTP+SSE transport")
        self._legacy = legacy
        await legacy.post(message)
        return True

    @property
    def sink(self) -> UpstreamSink:
        """Where the server's messages go."""
        assert self._sink is not None
        return self._sink

    @property
    def deadlines(self) -> Deadlines:
        """The response timeouts of the exchanges in progress."""
        return self._deadlines

    def stream_lost(self) -> None:
        """The HTTP+SSE stream, and the session with it, is gone: the next message starts a new one."""
        self._expired = self._memory.initialize is not None

    # ---- tasks ---------------------------------------------------------------------------------------------

    def spawn(self, coroutine: Any) -> asyncio.Task[None]:
        """Run ``coroutine`` as a task of this upstream (cancelled when it stops)."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._legacy is not None:
            self._legacy.close()


def _answers(line: bytes, message: OutgoingMessage) -> bool:
    return response_key(line) == message.key
