"""The gateway's pump for one upstream: HTTP exchanges in, the interceptor in between, one server out.

A ``Channel`` is to the gateway what the relay is to the stdio proxy: it hands each message from a downstream
exchange to its ``Interceptor``, sends what comes back to its ``Upstream``, commits the journal writes of each
turn of the event loop in one unit (``flush``), and hands every line released for the client to the right
``Stream``. It makes no journaling decision of its own.

Several exchanges share one upstream (every request of a session; every request of a workflow in 2026-07-28),
so two of them may carry the same JSON-RPC id. The channel then renames the second one's id on the way up
(``checkpoint-gw-N``) and restores the original id text, byte for byte, on the way down: the only edit the
gateway makes to a request, so each client reads its own id and no answer reaches another client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.gateway.backend import Backend
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.messages import internal_error_replies
from checkpoint_mcp.intercept.traced import TracedInterceptor
from checkpoint_mcp.intercept.turns import Flushed, Flushing, Resubmit
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.refusals import UpstreamExited
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.wire import (
    Kind,
    Message,
    WireParseError,
    classify,
    dumps,
    error_line,
    id_key,
    set_member,
    with_id,
)

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 10.0  # at close: how long answers to requests in flight are awaited (and journaled)
JOIN_POLL_SECONDS = 1.0  # a joined call looks again at least this often
CHANGE_NOTIFICATIONS = ("notifications/resources/updated",)  # besides every */list_changed


class CommitSignal:
    """Wakes every waiter after any journal commit of the process (re-sent calls waiting for an original)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        """A commit happened."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self) -> None:
        """Return after the next commit."""
        await self._event.wait()


class _Commit:
    """A batch of the journal's writes handed to the committer."""

    __slots__ = ("ended", "flushing", "started")

    def __init__(self, flushing: Flushing, started: float, ended: asyncio.Future[None]) -> None:
        self.flushing = flushing
        self.started = started
        self.ended = ended  # done when the committer has answered


class _Waiting:
    """A request sent upstream under ``key`` whose answer goes to ``stream``."""

    __slots__ = ("original", "stream")

    def __init__(self, stream: Stream, original: str | None) -> None:
        self.stream = stream
        self.original = original  # the original id's JSON text when it was renamed, else None


class Channel(Backend):
    """One upstream, its interceptor, and the downstream streams waiting for its answers (a ``Backend``)."""

    def __init__(
        self,
        name: str,
        interceptor: Interceptor,
        upstream: Upstream,
        *,
        unrelated: Callable[[bytes], None] | None = None,
        observe: Callable[[Stream, Any], None] | None = None,
        flushed: Callable[[float], None] | None = None,
        health: Callable[[str | None], None] | None = None,
        commits: CommitSignal | None = None,
        join_timeout: float = 30.0,
        committer: Committer | None = None,
    ) -> None:
        """``unrelated`` receives server messages that belong to no request (a session's GET stream);
        ``observe`` sees each final response's parsed body with its stream (metrics); ``flushed`` each commit's
        duration;
        ``health`` hears whether the upstream works (None once it answers; why not, if it dies before that);
        ``commits`` is shared by the channels of one process, so a re-sent call on one joins its original on
        another, for up to ``join_timeout`` seconds; ``committer``: the thread that commits the journal writes
        (None: they are committed on the event loop)."""
        self.name = name
        self._interceptor = interceptor
        self._upstream = upstream
        self._unrelated = unrelated
        self._observe = observe
        self._flushed = flushed
        self._health = health
        self._heard = False
        # Keyed by ``id_key`` (None for a value that is no JSON-RPC id: the interceptor refuses such requests,
        # so only an odd progress token or a stray answer can carry one, and it matches nothing that was sent).
        self._waiting: dict[tuple[str, Any] | None, _Waiting] = {}
        self._aliases: dict[tuple[str, Any] | None, Any] = {}  # original id key -> the id it was renamed to
        self._progress: dict[tuple[str, Any] | None, Stream] = {}
        self._next_alias = 0
        self._flush_scheduled = False
        self._committer = committer
        self._committing: _Commit | None = None
        self._commits = commits or CommitSignal()
        self._join_timeout = join_timeout
        self._joining: dict[tuple[str, Any], asyncio.Task[None]] = {}
        self.closed = asyncio.Event()
        """The upstream is gone (it died, or the channel was closed)."""
        self.exit_status: str | None = None
        self.last_active = time.monotonic()

    @property
    def fatal(self) -> str | None:
        """Why the journal is gone for good, if it is (the gateway must stop)."""
        return self._interceptor.fatal

    @property
    def busy(self) -> bool:
        """True while some request waits for its answer."""
        return bool(self._waiting)

    def waiting_streams(self) -> list[Stream]:
        """The streams of the requests waiting for their answer."""
        return [waiting.stream for waiting in self._waiting.values()]

    def calls_in_flight(self) -> int:
        """tools/call requests waiting for their answer."""
        return sum(1 for waiting in self._waiting.values() if waiting.stream.method == "tools/call")

    def running(self) -> int:
        """1 while its upstream runs, else 0."""
        return 0 if self.closed.is_set() else 1

    async def start(self) -> None:
        """Begin pumping the upstream's messages."""
        await self._upstream.start(self)

    # ---- downstream -> upstream ---------------------------------------------------------------------------

    def submit(
        self, message: Message, line: bytes, stream: Stream | None, carrier: Mapping[str, str] | None = None
    ) -> None:
        """Route one message from a client; a request's answer (and related messages) go to ``stream``.
        ``carrier``: the HTTP request's trace-context headers (telemetry on)."""
        self.last_active = time.monotonic()
        if self.closed.is_set():
            if stream is not None and message.kind is Kind.REQUEST:
                gone = UpstreamExited(workflow=None, seq=None, tool=None, exit_status=self.exit_status or "closed")
                stream.append(error_line(message.id, gone.to_error()), final=True)
            return
        if message.kind is Kind.REQUEST and stream is not None:
            line = self._register(message, line, stream)
        elif message.kind is Kind.NOTIFICATION and message.method == "notifications/cancelled":
            line = self._cancelled_upstream_id(message, line)
        if carrier and isinstance(self._interceptor, TracedInterceptor):
            self._interceptor.transport_context(carrier)
        self._route([line])

    def _register(self, message: Message, line: bytes, stream: Stream) -> bytes:
        key = id_key(message.id)
        original: str | None = None
        if key in self._waiting:
            alias = self._new_alias()
            original, text = with_id(line.decode(), dumps(alias))  # the message has an id: it is waited for
            line = text.encode()
            self._aliases[key] = alias
            key = id_key(alias)
        self._waiting[key] = _Waiting(stream, original)
        params = message.params
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and "progressToken" in meta:
            self._progress[id_key(meta["progressToken"])] = stream
        return line

    def _new_alias(self) -> str:
        while True:
            self._next_alias += 1
            alias = f"checkpoint-gw-{self._next_alias}"
            if id_key(alias) not in self._waiting:
                return alias

    def _cancelled_upstream_id(self, message: Message, line: bytes) -> bytes:
        params = message.params
        if not isinstance(params, dict) or "requestId" not in params:
            return line
        alias = self._aliases.get(id_key(params["requestId"]))
        if alias is None:
            return line
        return set_member(line.decode(), ("params", "requestId"), dumps(alias)).encode()

    def cancel(self, stream: Stream, reason: str) -> None:
        """The client closed a request's stream before its answer (2026-07-28: that is its cancellation)."""
        for key, waiting in list(self._waiting.items()):
            if waiting.stream is stream and key in self._joining:
                self._joining.pop(key).cancel()  # it was only waiting for another call: nothing ran
                del self._waiting[key]
                if isinstance(self._interceptor, TracedInterceptor):
                    self._interceptor.trace.from_client([_cancel_notice(key[1], reason)])
            elif waiting.stream is stream and key is not None:
                self._route([_cancel_notice(key[1], reason)])
                # Nobody reads its answer any more; if one still comes, the interceptor journals it all the same.
                self._waiting.pop(key, None)
                self._forget(key[1], waiting)

    def _route(self, lines: list[bytes]) -> None:
        for join in self._route_once(lines):
            key = self._key_of(join.line)
            if key is not None and key not in self._joining:
                self._joining[key] = asyncio.get_running_loop().create_task(self._join(key, join))

    def _route_once(self, lines: list[bytes]) -> list[Resubmit]:
        """Hand lines to the interceptor and send what it releases; the calls that must join an original."""
        try:
            routed = self._interceptor.from_client(lines)
        except Exception:
            logger.exception("internal error while routing %d line(s) from a client", len(lines))
            self._deliver(internal_error_replies(lines))
            return []
        if routed.to_upstream:
            self._upstream.send(b"".join(routed.to_upstream))
        self._deliver(routed.to_client)
        self._schedule_flush()
        loop = asyncio.get_running_loop()
        for probe_id, delay in self._interceptor.take_timers():
            loop.call_later(delay, self._probe_expired, probe_id)
        return routed.resubmits

    def _probe_expired(self, probe_id: str) -> None:
        """A tool policy's probe got no answer in time: its call stays in doubt (if it is still waiting)."""
        self._deliver(self._interceptor.probe_expired(probe_id))
        self._schedule_flush()

    @staticmethod
    def _key_of(line: bytes) -> tuple[str, Any] | None:
        try:
            return id_key(classify(line).id)
        except WireParseError:
            return None

    async def _join(self, key: tuple[str, Any], join: Resubmit) -> None:
        """Wait for the original's outcome to be committed, then decide the call again (a replay, usually);
        after the join timeout, the interceptor's still-in-flight refusal."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._join_timeout
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0 or self.closed.is_set():
                    if isinstance(self._interceptor, TracedInterceptor):
                        self._interceptor.trace.to_client([join.refusal])
                    self._deliver([join.refusal])
                    return
                # Woken by any commit of this process or (LISTEN/NOTIFY) of another replica; a second's poll
                # covers a notification lost with a connection.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(remaining, JOIN_POLL_SECONDS)):
                        await self._commits.wait()
                again = self._route_once([join.line])
                if not again:
                    return
                join = again[0]
        finally:
            self._joining.pop(key, None)

    # ---- upstream -> downstream (the UpstreamSink) --------------------------------------------------------

    def upstream_lines(self, lines: list[bytes]) -> None:
        """Messages from the server: route them (journaling outcomes) and hand them to their streams."""
        if not self._heard:
            self._heard = True
            if self._health is not None:
                self._health(None)
        try:
            routed = self._interceptor.from_upstream(lines)
        except Exception:
            # Answers must reach the client; unrecorded, their calls stay PENDING (in doubt), never re-run.
            logger.exception("internal error while routing %d line(s) from the upstream", len(lines))
            routed = lines
        self._deliver(routed)
        self._schedule_flush()

    def upstream_closed(self) -> None:
        """The server is gone: answer every request in flight (journaled calls stay PENDING: in doubt)."""
        if self.closed.is_set():
            return
        asyncio.get_running_loop().create_task(self._after_death())

    async def _after_death(self) -> None:
        status = await self._upstream.died()
        await self._settled()
        self._flush()
        self._end(status)
        if not self._heard and self._health is not None:
            self._health(f"the upstream exited before answering anything ({status})")
        logger.error("upstream of %s exited (%s)", self.name, status)

    def pause_client(self, paused: bool) -> None:
        """Backpressure from the server: HTTP bodies are bounded (``--max-body``), so nothing is paused."""
        logger.debug("upstream of %s %s reading", self.name, "stopped" if paused else "resumed")

    def request_abandoned(self, ident: Any, reason: str) -> None:
        """One request will get no answer: the interceptor answers it (a journaled call stays in doubt)."""
        self._deliver(self._interceptor.abandon(ident, reason))
        self._schedule_flush()

    # ---- journal commits ----------------------------------------------------------------------------------

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._committing is None and self._interceptor.needs_flush:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._begin_flush)

    def _begin_flush(self) -> None:
        """Once per loop turn: commit this turn's journal writes here if the journal says that is cheaper and
        cannot wait (SQLite, its write lock free), else hand them to the committer; what waits for them is
        released when it says they are durable (``_committed``), and the writes of the turns meanwhile go in the
        next commit. Without a running committer (or with nothing to write), the flush happens here and now."""
        self._flush_scheduled = False
        committer = self._committer
        if committer is None or not committer.running or self._committing is not None or self.closed.is_set():
            if self._committing is None:
                self._flush()
            return
        if not self._interceptor.needs_flush:
            return
        started = time.perf_counter()
        try:
            flushing = self._interceptor.begin_flush()
        except Exception:
            logger.exception("internal error while committing the journal")
            return
        if flushing.batch is None:
            self._release(self._interceptor.end_flush(flushing, None), started)
            return
        try:
            flushed = self._interceptor.flush_here(flushing)
        except Exception:
            logger.exception("internal error while committing the journal")
            return
        if flushed is not None:
            self._release(flushed, started)
            return
        commit = _Commit(flushing, started, asyncio.get_running_loop().create_future())
        self._committing = commit
        try:
            committer.submit(flushing.batch, lambda error: self._committed(commit, error))
        except Exception as exc:
            self._committed(commit, exc)

    def _committed(self, commit: _Commit, error: BaseException | None) -> None:
        """The committer wrote (or failed to write) a batch: release (or refuse) what waited for it."""
        self._committing = None
        if not commit.ended.done():
            commit.ended.set_result(None)
        try:
            flushed = self._interceptor.end_flush(commit.flushing, error)
        except Exception:
            logger.exception("internal error while committing the journal")
        else:
            self._release(flushed, commit.started)
        self._schedule_flush()

    async def _settled(self) -> None:
        """Return once no commit is under way (the committer answers every batch, or fails them all if it dies)."""
        while self._committing is not None:
            await asyncio.shield(self._committing.ended)

    def _flush(self) -> None:
        """Commit on the event loop, now (at the end, or without a running committer); never while the committer
        has a batch of this channel (``_settled`` first)."""
        self._flush_scheduled = False
        if self._committing is not None or not self._interceptor.needs_flush:
            return
        started = time.perf_counter()
        try:
            flushed = self._interceptor.flush()
        except Exception:
            logger.exception("internal error while committing the journal")
            return
        self._release(flushed, started)

    def _release(self, flushed: Flushed, started: float) -> None:
        if self._flushed is not None:
            self._flushed(time.perf_counter() - started)
        self._commits.notify()
        if flushed.to_upstream and not self.closed.is_set():
            self._upstream.send(b"".join(flushed.to_upstream))
        if flushed.journaled:
            debug.trigger("after_forward")
        self._deliver(flushed.to_client)

    # ---- delivery -----------------------------------------------------------------------------------------

    def _deliver(self, lines: list[bytes]) -> None:
        for line in lines:
            try:
                message = classify(line)
            except WireParseError:
                logger.warning("the upstream of %s sent a line that is not JSON; dropped", self.name)
                continue
            if message.kind is Kind.RESPONSE or (message.kind is Kind.OTHER and message.has_id):
                waiting = self._waiting.pop(id_key(message.id), None)
                if waiting is None:
                    if message.id is None and self._waiting:
                        self._oldest().append(line)  # an error about an unparsable message of some client
                    else:
                        logger.debug("an answer for an unknown id %r was dropped", message.id)
                    continue
                self._forget(message.id, waiting)
                answer = line
                if waiting.original is not None:
                    text = line.decode()
                    replaced, restored = with_id(text, waiting.original)
                    if replaced is None:  # an answer with no id member at all
                        restored = set_member(text, ("id",), waiting.original)
                    answer = restored.encode()
                waiting.stream.append(answer, final=True, body=message.body)
                if self._observe is not None:
                    self._observe(waiting.stream, message.body)
            else:
                self._related(message, line)

    def _forget(self, ident: Any, waiting: _Waiting) -> None:
        for original, alias in list(self._aliases.items()):
            if alias == ident:
                del self._aliases[original]
        for token, stream in list(self._progress.items()):
            if stream is waiting.stream:
                del self._progress[token]

    def _oldest(self) -> Stream:
        return next(iter(self._waiting.values())).stream

    def _related(self, message: Message, line: bytes) -> None:
        """A server request or notification: to the stream it relates to, if that can be told."""
        params = message.params
        if message.method == "notifications/progress" and isinstance(params, dict):
            stream = self._progress.get(id_key(params.get("progressToken")))
            if stream is not None:
                stream.append(line)
                return
        method = message.method or ""
        if method.endswith("/list_changed") or method in CHANGE_NOTIFICATIONS:
            listeners = [w.stream for w in self._waiting.values() if w.stream.kind is StreamKind.LISTEN]
            if listeners:
                for stream in listeners:
                    stream.append(line)
                return
        # With one request open, a server request (sampling, elicitation, roots) or a log message is almost
        # surely part of it, and a client handles it on either stream; with several, only the GET stream fits.
        open_requests = {id(w.stream): w.stream for w in self._waiting.values() if w.stream.kind is StreamKind.REQUEST}
        if len(open_requests) == 1:
            next(iter(open_requests.values())).append(line)
        elif self._unrelated is not None:
            self._unrelated(line)
        else:
            logger.debug("a %s from the upstream of %s relates to no open request; dropped", method, self.name)

    # ---- the end ------------------------------------------------------------------------------------------

    def _end(self, status: str) -> None:
        self.exit_status = status
        for task in self._joining.values():
            task.cancel()
        self._joining.clear()
        self._deliver(self._interceptor.upstream_gone(status))
        for waiting in self._waiting.values():
            waiting.stream.finish()
        self._waiting.clear()
        self._flush()  # what the interceptor wrote about the abandoned calls
        self.closed.set()

    async def close(self, reason: str = "stopped at shutdown") -> None:
        """Let the requests in flight finish and be journaled (bounded), then end the upstream."""
        if self.closed.is_set():
            return
        deadline = time.monotonic() + DRAIN_SECONDS
        while self._waiting and not self.closed.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if self._waiting and not self.closed.is_set():
            logger.warning("%d request(s) of %s unanswered after %.0fs", len(self._waiting), self.name, DRAIN_SECONDS)
        if self.closed.is_set():
            return
        self.closed.set()
        status = await self._upstream.shutdown()
        await self._settled()
        self._flush()
        self._end(reason if self._waiting else status)

    def kill(self) -> None:
        """End the upstream at once (the gateway is going down hard)."""
        self._upstream.kill()


def _cancel_notice(ident: Any, reason: str) -> bytes:
    """A ``notifications/cancelled`` line for the request ``ident``."""
    notice = dumps({"jsonrpc": "2.0", "method": "notifications/cancelled"})
    return set_member(notice, ("params",), dumps({"requestId": ident, "reason": reason})).encode() + b"\n"
