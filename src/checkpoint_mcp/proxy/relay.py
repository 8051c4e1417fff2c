"""The pump: the client's stdio <-> an ``Upstream``, line by line, with the interceptor in between.

The relay owns the client's file descriptors and drives one upstream (a child over stdio, or a remote server:
see ``upstream.Upstream``); it knows nothing about MCP. It reads whatever the client wrote, splits it into
complete lines, hands all of them to the interceptor at once (so their journal writes share one commit), and
writes what comes back; the upstream hands it complete lines the same way. Writes never block the loop: when a
side stops reading, the other side is paused instead (backpressure), so memory stays bounded.

Lifecycle (every wait is bounded):

* client EOF: stop reading the client, let the journaled calls in flight finish and their answers be journaled
  (up to ``DRAIN_SECONDS``; other requests are not waited for: a server may silently drop a request it
  rejects), then shut the upstream down (``Upstream.shutdown``), and answer what is left with ``Stopped``;
* SIGTERM/SIGINT, before or during that drain: end it at once (answers that have arrived are journaled), give
  the upstream ``SIGNAL_GRACE_SECONDS`` to shut down, then kill it; a second signal kills it at once;
* upstream gone: answer every request in flight with an error (journaled calls stay PENDING: in doubt), and
  those the client sent within ``LATE_REQUEST_SECONDS``, clean up what is left of it, exit non-zero;
* the proxy itself killed: a child upstream dies with us (see ``upstream.stdio.process.spawn``).

The client's pipes are pumped by the loop or by threads, and signals reach the loop the platform's way
(``platforms.stdio``, ``platforms.signals``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import signal
from typing import IO, Any

from checkpoint_mcp import debug
from checkpoint_mcp.intercept.interceptor import Interceptor
from checkpoint_mcp.intercept.messages import internal_error_replies
from checkpoint_mcp.intercept.turns import Flushed, Flushing
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.platforms import signals, stdio
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.upstream.stdio.pipes import PIPE_READ, WRITE_BUFFER_HIGH, LineSplitter, Reader, Writer

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 10.0  # after the client leaves: how long answers to journaled calls in flight are awaited
SIGNAL_GRACE_SECONDS = 1.0  # after SIGTERM/SIGINT: how long the upstream's graceful shutdown may take
CLIENT_FLUSH_SECONDS = 2.0  # at exit: how long what we still owe the client may take to write
LATE_REQUEST_SECONDS = 0.5  # after the upstream died: how long requests already on their way are still answered


class Relay:
    """One proxy session: pump both directions between the client and its upstream, shut down cleanly."""

    def __init__(
        self,
        upstream: Upstream,
        interceptor: Interceptor,
        client_in: IO[bytes],
        client_out: IO[bytes],
        committer: Committer | None = None,
    ):
        """``committer``: the thread that takes a commit that would wait (``Journal.write_now``: PostgreSQL's,
        SQLite's while another connection holds the write lock), so the loop goes on meanwhile: a request that
        is not journaled passes the lines held for it (``Interceptor._release_up``). None: every commit is made
        on the loop."""
        self._upstream = upstream
        self._interceptor = interceptor
        self._client_in = client_in
        self._client_out = client_out
        self._from_client = LineSplitter()
        self._client_gone = asyncio.Event()
        self._upstream_gone = asyncio.Event()
        self._settled = asyncio.Event()
        self._hurry = asyncio.Event()
        self._signal: int | None = None
        self._fatal: str | None = None
        self._flush_handle: asyncio.Handle | None = None  # a commit left to the next loop turn (``_schedule_flush``)
        self._committer = committer
        self._committing: asyncio.Future[None] | None = None  # done when the committer has answered
        self._client_reader: asyncio.ReadTransport | None = None
        self._client_writer: asyncio.WriteTransport | None = None
        self._client_writer_alive = True

    # ---- data paths (called by the protocols) --------------------------------------------------------------

    def client_data(self, data: bytes) -> None:
        """Lines from the client: route them, then write both ways."""
        lines = self._from_client.feed(data)
        if lines:
            self._route_client_lines(lines)

    def _route_client_lines(self, lines: list[bytes]) -> None:
        try:
            routed = self._interceptor.from_client(lines)
        except Exception:
            # A bug of ours must not swallow requests: answer them, and forward none of them.
            logger.exception("internal error while routing %d line(s) from the client", len(lines))
            self._write_client(internal_error_replies(lines))
            return
        self._write_upstream(routed.to_upstream)
        self._write_client(routed.to_client)
        self._schedule_flush()
        self._check_fatal()
        loop = asyncio.get_running_loop()
        for probe_id, delay in self._interceptor.take_timers():
            loop.call_later(delay, self._probe_expired, probe_id)

    def _probe_expired(self, probe_id: str) -> None:
        """A tool policy's probe got no answer in time: its call stays in doubt (if it is still waiting)."""
        self._write_client(self._interceptor.probe_expired(probe_id))
        self._after_answers()

    def _write_upstream(self, lines: list[bytes]) -> None:
        if lines:
            self._upstream.send(b"".join(lines))

    def _schedule_flush(self) -> None:
        """Commit the journal writes of this loop turn where its last callback has run: at once when nothing else
        is ready in the turn (a call alone, sequentially: no second turn just to commit it), else once the rest
        has run (both pipes read in one turn share one durable commit under load: group commit)."""
        if self._committing is not None or not self._interceptor.needs_flush:
            return
        loop = asyncio.get_running_loop()
        if _turn_ends(loop, self._flush_handle):
            self._begin_flush()
        elif self._flush_handle is None:
            # Whichever of the turn's callbacks runs last commits (its ``_schedule_flush``); this one is for a
            # turn whose last callback is not ours.
            self._flush_handle = loop.call_soon(self._begin_flush)

    def _unschedule_flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None

    def _begin_flush(self) -> None:
        """Once per loop turn: commit here if the journal says that is cheaper and cannot wait, else hand the
        batch to the committer and go on; what waits for it is released in ``_committed``, and the writes of the
        turns meanwhile go in the next commit (as the gateway's ``Channel`` does)."""
        self._unschedule_flush()
        committer = self._committer
        if committer is None:
            self._flush()
            return
        if self._committing is not None or not self._interceptor.needs_flush:
            return
        try:
            flushing = self._interceptor.begin_flush()
            if flushing.batch is None:
                self._release(self._interceptor.end_flush(flushing, None))
                return
            flushed = self._interceptor.flush_here(flushing)
        except Exception:
            logger.exception("internal error while committing the journal")
            return
        if flushed is not None:
            self._release(flushed)
            return
        if not committer.running:
            try:
                committer.start()  # the first commit that would wait: most SQLite proxies never need the thread
            except Exception as exc:
                logger.error("cannot start the journal's committer: %s", exc)
                self._release(self._interceptor.end_flush(flushing, exc))
                return
        self._committing = asyncio.get_running_loop().create_future()
        try:
            committer.submit(flushing.batch, lambda error: self._committed(flushing, error))
        except Exception as exc:
            self._committed(flushing, exc)

    def _committed(self, flushing: Flushing, error: BaseException | None) -> None:
        """The committer wrote (or failed to write) a batch: release (or refuse) what waited for it."""
        if self._committing is not None and not self._committing.done():
            self._committing.set_result(None)
        self._committing = None
        try:
            flushed = self._interceptor.end_flush(flushing, error)
        except Exception:
            logger.exception("internal error while committing the journal")
        else:
            self._release(flushed)
        self._after_answers()

    async def _settle_commits(self) -> None:
        """Return once no commit is under way on the committer (it answers every batch it was given)."""
        while self._committing is not None:
            await asyncio.shield(self._committing)

    def _flush(self) -> None:
        """Commit on the event loop, now; never while the committer has a batch (``_settle_commits`` first)."""
        self._unschedule_flush()
        if self._committing is not None or not self._interceptor.needs_flush:
            return
        try:
            flushed = self._interceptor.flush()
        except Exception:
            logger.exception("internal error while committing the journal")
            return
        self._release(flushed)

    def _release(self, flushed: Flushed) -> None:
        self._write_upstream(flushed.to_upstream)
        if flushed.journaled:
            debug.trigger("after_forward")
        self._write_client(flushed.to_client)
        self._check_fatal()

    def _check_fatal(self) -> None:
        """The journal is gone for good: stop taking calls and shut down (the exit code says so)."""
        if self._interceptor.fatal is not None and self._fatal is None:
            self._fatal = self._interceptor.fatal
            logger.error("stopping: %s", self._fatal)
            if self._client_reader is not None:
                self._client_reader.pause_reading()
            self.client_eof()

    def client_eof(self) -> None:
        """The client closed our stdin."""
        if self._client_gone.is_set():
            return
        tail = self._from_client.flush()
        if tail:
            self._route_client_lines(tail)
        logger.info(
            "client closed its end; draining %d journaled call(s) in flight", self._interceptor.journaled_outstanding()
        )
        self._client_gone.set()

    # ---- the upstream's side (``UpstreamSink``) ------------------------------------------------------------

    def upstream_lines(self, lines: list[bytes]) -> None:
        """Lines from the upstream: route them (journaling outcomes) and write them to the client."""
        try:
            routed = self._interceptor.from_upstream(lines)
        except Exception:
            # Answers must reach the client; unrecorded, their calls stay PENDING (in doubt), never re-run.
            logger.exception("internal error while routing %d line(s) from the upstream", len(lines))
            routed = lines
        self._write_client(routed)
        self._after_answers()

    def upstream_closed(self) -> None:
        """The upstream is gone."""
        self._upstream_gone.set()

    def pause_client(self, paused: bool) -> None:
        """Stop (or resume) reading the client while the upstream is not reading us."""
        if self._client_reader is not None and not self._client_reader.is_closing():
            if paused:
                self._client_reader.pause_reading()
            else:
                self._client_reader.resume_reading()

    def request_abandoned(self, ident: Any, reason: str) -> None:
        """One request will get no answer from the upstream: answer it ourselves."""
        self._write_client(self._interceptor.abandon(ident, reason))
        self._after_answers()

    def _after_answers(self) -> None:
        self._schedule_flush()
        if self._interceptor.journaled_outstanding() == 0:
            self._settled.set()
        self._check_fatal()

    def _write_client(self, lines: list[bytes]) -> None:
        if not lines:
            return
        if self._client_writer is not None and self._client_writer_alive:
            self._client_writer.write(b"".join(lines))
        else:
            logger.debug("client is gone; dropped %d line(s) for it", len(lines))

    def _client_writer_lost(self) -> None:
        if self._client_writer_alive:
            self._client_writer_alive = False
            logger.info("client stopped reading our stdout")
            self.client_eof()

    def on_signal(self, signum: int) -> None:
        """SIGTERM/SIGINT: shut down as on client EOF; a second signal kills the upstream at once."""
        if self._signal is not None:
            logger.warning("second %s: killing the upstream now", signal.Signals(signum).name)
            self._upstream.kill()
            self._upstream_gone.set()
            return
        self._signal = signum
        logger.info("%s received; shutting down", signal.Signals(signum).name)
        self._hurry.set()
        if self._client_reader is not None:
            self._client_reader.pause_reading()
        self.client_eof()

    # ---- lifecycle ----------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Run until the client or the upstream leaves; return the process exit code."""
        loop = asyncio.get_running_loop()
        await self._connect_client_writer(loop)
        await self._upstream.start(self)
        restore_signals = signals.on_loop(loop, self.on_signal)
        try:
            self._client_reader = await stdio.connect_read(
                loop, Reader(self.client_data, self.client_eof), self._client_in, max_size=PIPE_READ
            )
            client_gone = asyncio.ensure_future(self._client_gone.wait())
            upstream_gone = asyncio.ensure_future(self._upstream_gone.wait())
            await asyncio.wait({client_gone, upstream_gone}, return_when=asyncio.FIRST_COMPLETED)
            if self._upstream_gone.is_set() and not self._client_gone.is_set():
                code = await self._after_upstream_died()
            else:
                code = await self._after_client_left()
            for task in (client_gone, upstream_gone):
                task.cancel()
            if self._committer is not None:
                await self._committer.close()
            await self._flush_client()
        finally:
            restore_signals()  # a handler left behind a closed loop would swallow the next SIGINT or SIGTERM
        return code

    async def _connect_client_writer(self, loop: asyncio.AbstractEventLoop) -> None:
        writer = Writer(self._upstream.pause_reading, self._client_writer_lost)
        self._client_writer = await stdio.connect_write(loop, writer, self._client_out)
        self._client_writer.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)

    async def _after_upstream_died(self) -> int:
        await self._settle_commits()
        self._flush()
        status = await self._upstream.died()
        in_flight = self._interceptor.outstanding()
        self._write_client(self._interceptor.upstream_gone(status))
        if not self._client_gone.is_set():
            # What the client sent before it could know (in our pipe, or on its way from a reader thread) is
            # answered too, rather than left to a client that waits for it.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LATE_REQUEST_SECONDS):
                    await self._client_gone.wait()
            self._write_client(self._interceptor.upstream_gone(status))
        await self._upstream.shutdown()
        if in_flight:
            logger.error(
                "the upstream server exited (%s) with %d request(s) in flight: they were answered with errors, "
                "and the journaled ones are in doubt",
                status,
                in_flight,
            )
        else:
            logger.error("the upstream server exited (%s)", status)
        return 1

    async def _after_client_left(self) -> int:
        interceptor = self._interceptor
        if interceptor.journaled_outstanding() and not self._upstream_gone.is_set() and not self._hurry.is_set():
            self._settled.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_SECONDS):
                    while interceptor.journaled_outstanding() and not self._upstream_gone.is_set():
                        await _first(self._settled.wait(), self._upstream_gone.wait(), self._hurry.wait())
                        if self._hurry.is_set():
                            break
                        self._settled.clear()
            left = interceptor.journaled_outstanding()
            if left:
                logger.warning("%d journaled call(s) still unanswered at shutdown; they stay in doubt", left)
        await self._settle_commits()
        self._flush()
        if self._hurry.is_set():
            try:
                async with asyncio.timeout(SIGNAL_GRACE_SECONDS):
                    await self._upstream.shutdown()
            except TimeoutError:
                logger.info("the upstream did not stop within %.0fs of the signal; killing it", SIGNAL_GRACE_SECONDS)
                self._upstream.kill()
        else:
            await self._upstream.shutdown()
        await self._settle_commits()
        self._flush()
        why = f"{signal.Signals(self._signal).name} received" if self._signal is not None else "the client left"
        self._write_client(interceptor.stopped(why))
        if self._fatal is not None:
            return 1
        return 128 + self._signal if self._signal is not None else 0

    async def _flush_client(self) -> None:
        if self._client_reader is not None:
            self._client_reader.close()
        writer = self._client_writer
        if writer is not None and self._client_writer_alive:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CLIENT_FLUSH_SECONDS):
                    while writer.get_write_buffer_size() and self._client_writer_alive:
                        await asyncio.sleep(0.005)
            writer.close()


async def _first(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _turn_ends(loop: asyncio.AbstractEventLoop, own: asyncio.Handle | None) -> bool:
    """Whether nothing but ``own`` is left to run in this turn of ``loop`` (no other callback is ready).

    asyncio's loop keeps its ready callbacks in ``_ready``: those of this turn not yet run (a read of the other
    pipe among them) and those scheduled since. No public API says so; a loop without it (uvloop) gets False, and
    the commit waits for the next turn, as it always did.
    """
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, collections.deque):
        return False
    return not ready or (len(ready) == 1 and ready[0] is own)
