"""The pump: client stdio <-> upstream child stdio, line by line, with the interceptor in between.

The relay owns every file descriptor and the child process; it knows nothing about MCP. It reads whatever is
available on one side, splits it into complete lines, hands all of them to the interceptor at once (so their
journal writes share one commit), and writes what comes back. Writes never block the loop: when a side stops
reading, the other side is paused instead (backpressure), so memory stays bounded.

Lifecycle (every wait is bounded):

* client EOF (or SIGTERM/SIGINT): stop reading the client, let the requests in flight finish and their answers
  be journaled (up to ``DRAIN_SECONDS``), close the upstream's stdin, wait ``EXIT_GRACE_SECONDS`` for it to
  exit, then SIGTERM and, ``TERM_GRACE_SECONDS`` later, SIGKILL its whole process group;
* upstream EOF: answer every request in flight with an error (journaled calls stay PENDING: in doubt), kill
  what is left of its process group, exit non-zero;
* the proxy itself killed: the child has ``PR_SET_PDEATHSIG`` (Linux), so it dies with us.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from typing import IO, Any, Protocol

from checkpoint_mcp import debug
from checkpoint_mcp.proxy.interceptor import Interceptor, internal_error_replies
from checkpoint_mcp.proxy.upstream import describe_status, group_alive, signal_group

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 10.0  # after the client leaves: how long answers to calls in flight are awaited (and journaled)
EXIT_GRACE_SECONDS = 2.0  # after closing the upstream's stdin: how long it has to exit on its own
TERM_GRACE_SECONDS = 2.0  # after SIGTERM to the upstream's process group: how long before SIGKILL
READ_CHUNK = 1 << 18  # for a client stdin that is a regular file
# A pipe holds 64 KiB; asyncio's default 256 KiB read buffer can cost an mmap, mremap and munmap per read.
PIPE_READ = 1 << 16
WRITE_BUFFER_HIGH = 1 << 22  # bytes queued for one side before the other side is paused


class LineSplitter:
    """Turns a stream of chunks into complete lines, each with its ``\\n``; keeps the unfinished tail."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines completed by ``data``."""
        newline = data.find(b"\n")
        if newline < 0:
            self._partial += data
            return []
        lines: list[bytes] = []
        start = 0
        if self._partial:
            self._partial += data[: newline + 1]
            lines.append(bytes(self._partial))
            self._partial.clear()
            start = newline + 1
            newline = data.find(b"\n", start)
        while newline >= 0:
            lines.append(data[start : newline + 1])
            start = newline + 1
            newline = data.find(b"\n", start)
        if start < len(data):
            self._partial += data[start:]
        return lines

    def flush(self) -> list[bytes]:
        """The unfinished tail as a last line (at EOF), if any."""
        if not self._partial:
            return []
        tail = bytes(self._partial) + b"\n"
        self._partial.clear()
        return [tail]


class _Reader(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        self._on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


class _Writer(asyncio.Protocol):
    """A write end whose fullness pauses a reader, and whose loss is reported once."""

    def __init__(self, on_pause: Callable[[bool], None], on_lost: Callable[[], None]) -> None:
        self._on_pause = on_pause
        self._on_lost = on_lost

    def pause_writing(self) -> None:
        self._on_pause(True)

    def resume_writing(self) -> None:
        self._on_pause(False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()


class Relay:
    """One proxy session: spawn the upstream, pump both directions, shut down cleanly."""

    def __init__(
        self,
        upstream: subprocess.Popen[bytes],
        interceptor: Interceptor,
        client_in: IO[bytes],
        client_out: IO[bytes],
    ):
        self._upstream = upstream
        self._interceptor = interceptor
        self._client_in = client_in
        self._client_out = client_out
        self._from_client = LineSplitter()
        self._from_upstream = LineSplitter()
        self._client_gone = asyncio.Event()
        self._upstream_gone = asyncio.Event()
        self._settled = asyncio.Event()
        self._signal: int | None = None
        self._fatal: str | None = None
        self._flush_scheduled = False
        self._client_reader: asyncio.ReadTransport | None = None
        self._client_writer: _Sink | None = None
        self._client_writer_alive = True
        self._upstream_reader: asyncio.ReadTransport | None = None
        self._upstream_stdin: asyncio.WriteTransport | None = None
        self._upstream_exited: asyncio.Future[int] | None = None

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

    def _write_upstream(self, lines: list[bytes]) -> None:
        if lines and self._upstream_stdin is not None and not self._upstream_stdin.is_closing():
            self._upstream_stdin.write(b"".join(lines))

    def _schedule_flush(self) -> None:
        """Commit the journal writes of this turn once both pipes' callbacks of the turn have run, so a burst
        of calls and answers shares one durable commit."""
        if not self._flush_scheduled and self._interceptor.needs_flush:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._interceptor.needs_flush:
            return
        try:
            flushed = self._interceptor.flush()
        except Exception:
            logger.exception("internal error while committing the journal")
            return
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
        logger.info("client closed its end; draining %d request(s) in flight", self._interceptor.outstanding())
        self._client_gone.set()

    def upstream_data(self, data: bytes) -> None:
        """Lines from the upstream: route them (journaling outcomes) and write them to the client."""
        lines = self._from_upstream.feed(data)
        if lines:
            try:
                routed = self._interceptor.from_upstream(lines)
            except Exception:
                # Answers must reach the client; unrecorded, their calls stay PENDING (in doubt), never re-run.
                logger.exception("internal error while routing %d line(s) from the upstream", len(lines))
                routed = lines
            self._write_client(routed)
            self._schedule_flush()
            if self._interceptor.outstanding() == 0:
                self._settled.set()
            self._check_fatal()

    def upstream_eof(self) -> None:
        """The upstream closed its stdout: it is gone."""
        tail = self._from_upstream.flush()
        if tail:
            self._write_client(self._interceptor.from_upstream(tail))
            self._schedule_flush()
        self._upstream_gone.set()

    def upstream_stdin_lost(self) -> None:
        """Writing to the upstream failed (it closed its stdin); its EOF on stdout will follow."""
        logger.debug("the upstream's stdin is closed")

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

    def pause_client_reader(self, paused: bool) -> None:
        """Stop (or resume) reading the client while the upstream is not reading us."""
        if self._client_reader is not None and not self._client_reader.is_closing():
            if paused:
                self._client_reader.pause_reading()
            else:
                self._client_reader.resume_reading()

    def _pause_upstream_reader(self, paused: bool) -> None:
        reader = self._upstream_reader
        if reader is not None and not reader.is_closing():
            if paused:
                reader.pause_reading()
            else:
                reader.resume_reading()

    def on_signal(self, signum: int) -> None:
        """SIGTERM/SIGINT: shut down as on client EOF; a second signal kills the upstream at once."""
        if self._signal is not None:
            logger.warning("second %s: killing the upstream now", signal.Signals(signum).name)
            self._kill_group(signal.SIGKILL)
            self._upstream_gone.set()
            return
        self._signal = signum
        logger.info("%s received; shutting down", signal.Signals(signum).name)
        if self._client_reader is not None:
            self._client_reader.pause_reading()
        self.client_eof()

    # ---- lifecycle ----------------------------------------------------------------------------------------

    async def run(self) -> int:
        """Run until the client or the upstream leaves; return the process exit code."""
        loop = asyncio.get_running_loop()
        await self._connect_client_writer(loop)
        await self._adopt_upstream(loop)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.on_signal, signum)
        await self._connect_client_reader(loop)

        client_gone = asyncio.ensure_future(self._client_gone.wait())
        upstream_gone = asyncio.ensure_future(self._upstream_gone.wait())
        await asyncio.wait({client_gone, upstream_gone}, return_when=asyncio.FIRST_COMPLETED)
        if self._upstream_gone.is_set() and not self._client_gone.is_set():
            code = await self._after_upstream_died()
        else:
            code = await self._after_client_left()
        for task in (client_gone, upstream_gone):
            task.cancel()
        await self._flush_client()
        return code

    async def _adopt_upstream(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pump the already running child's pipes, and learn when it exits (a pidfd, else a thread)."""
        proc = self._upstream
        assert proc.stdin is not None
        assert proc.stdout is not None
        reader, _ = await loop.connect_read_pipe(lambda: _Reader(self.upstream_data, self.upstream_eof), proc.stdout)
        reader.max_size = PIPE_READ  # type: ignore[attr-defined]
        self._upstream_reader = reader
        writer, _ = await loop.connect_write_pipe(
            lambda: _Writer(self.pause_client_reader, self.upstream_stdin_lost), proc.stdin
        )
        writer.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._upstream_stdin = writer
        exited: asyncio.Future[int] = loop.create_future()
        self._upstream_exited = exited
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            loop.run_in_executor(None, _wait_into, proc, loop, exited)
        else:

            def reap() -> None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
                if not exited.done():
                    exited.set_result(proc.wait())

            loop.add_reader(pidfd, reap)

    async def _connect_client_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        reader = _Reader(self.client_data, self.client_eof)
        try:
            transport, _ = await loop.connect_read_pipe(lambda: reader, self._client_in)
            transport.max_size = PIPE_READ  # type: ignore[attr-defined]
            self._client_reader = transport
        except ValueError:
            # A regular file (``checkpoint … < requests.jsonl``): no pipe transport; read it in a thread.
            loop.run_in_executor(None, _read_file_into, self._client_in, loop, self.client_data, self.client_eof)

    async def _connect_client_writer(self, loop: asyncio.AbstractEventLoop) -> None:
        writer = _Writer(self._pause_upstream_reader, self._client_writer_lost)
        try:
            wtransport, _ = await loop.connect_write_pipe(lambda: writer, self._client_out)
            wtransport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
            self._client_writer = wtransport
        except ValueError:
            self._client_writer = _BlockingWriter(self._client_out)

    async def _after_upstream_died(self) -> int:
        self._flush()
        status = await self._exit_status(EXIT_GRACE_SECONDS)
        in_flight = self._interceptor.outstanding()
        self._write_client(self._interceptor.upstream_gone(status))
        self._kill_group(signal.SIGTERM)
        await self._reap_group()
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
        if self._interceptor.outstanding() and not self._upstream_gone.is_set():
            self._settled.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_SECONDS):
                    while self._interceptor.outstanding() and not self._upstream_gone.is_set():
                        await _first(self._settled.wait(), self._upstream_gone.wait())
                        self._settled.clear()
            left = self._interceptor.outstanding()
            if left:
                logger.warning(
                    "%d request(s) still unanswered after %.0fs; their calls stay in doubt", left, DRAIN_SECONDS
                )
        if self._upstream_stdin is not None:
            self._upstream_stdin.close()
        status = await self._exit_status(EXIT_GRACE_SECONDS)
        if status == "still running":
            logger.info("upstream did not exit after its stdin closed; sending SIGTERM")
        self._kill_group(signal.SIGTERM)
        await self._reap_group()
        self._flush()
        self._write_client(self._interceptor.upstream_gone("stopped at shutdown"))
        if self._fatal is not None:
            return 1
        return 128 + self._signal if self._signal is not None else 0

    async def _exit_status(self, timeout: float) -> str:
        """Wait up to ``timeout`` for the upstream process to exit; describe how it ended."""
        assert self._upstream_exited is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._upstream_exited)
        if not self._upstream_exited.done():
            return "still running"
        return describe_status(self._upstream.returncode)

    def _kill_group(self, signum: int) -> None:
        signal_group(self._upstream.pid, signum)

    async def _reap_group(self) -> None:
        """Wait until no process of the upstream's group is left, escalating to SIGKILL."""
        pgid = self._upstream.pid
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TERM_GRACE_SECONDS
        while group_alive(pgid):
            if loop.time() >= deadline:
                self._kill_group(signal.SIGKILL)
                deadline = loop.time() + TERM_GRACE_SECONDS
            await asyncio.sleep(0.01)
        assert self._upstream_exited is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TERM_GRACE_SECONDS):
                await asyncio.shield(self._upstream_exited)
        for transport in (self._upstream_reader, self._upstream_stdin):
            if transport is not None:
                transport.close()

    async def _flush_client(self) -> None:
        if self._client_reader is not None:
            self._client_reader.close()
        writer = self._client_writer
        if isinstance(writer, asyncio.WriteTransport) and self._client_writer_alive:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TERM_GRACE_SECONDS):
                    while writer.get_write_buffer_size() and self._client_writer_alive:
                        await asyncio.sleep(0.005)
            writer.close()


def _wait_into(proc: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop, exited: asyncio.Future[int]) -> None:
    """Without pidfds: wait for the child on a thread and report to the loop."""
    code = proc.wait()

    def report() -> None:
        if not exited.done():
            exited.set_result(code)

    loop.call_soon_threadsafe(report)


async def _first(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _read_file_into(
    source: IO[bytes], loop: asyncio.AbstractEventLoop, on_data: Callable[[bytes], None], on_eof: Callable[[], None]
) -> None:
    while chunk := source.read(READ_CHUNK):
        loop.call_soon_threadsafe(on_data, chunk)
    loop.call_soon_threadsafe(on_eof)


class _Sink(Protocol):
    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class _BlockingWriter:
    """For a client stdout that is a regular file: plain blocking writes."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out

    def write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    def close(self) -> None:
        self._out.flush()
