"""A stdio upstream: the child process started by ``process.spawn``, pumped line by line.

Its lifecycle, every wait bounded: at shutdown its stdin is closed, it has ``EXIT_GRACE_SECONDS`` to exit on its
own, then its process group gets SIGTERM and, ``TERM_GRACE_SECONDS`` later, its whole process tree SIGKILL. When
its stdout closes it is gone: whatever is left of its tree is killed the same way. Its stdout also counts as
closed when no process of the tree but a shell waiting for its children still holds it (checked every
``STDOUT_CHECK_SECONDS``, twice in a row): such a shell would otherwise keep the pipe open forever. If the proxy
itself is killed, the keeper kills the whole tree (see ``keeper.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal

from checkpoint_mcp.upstream.base import UpstreamSink
from checkpoint_mcp.upstream.stdio.keeper import LocalProcess
from checkpoint_mcp.upstream.stdio.pipes import PIPE_READ, WRITE_BUFFER_HIGH, LineSplitter, Reader, Writer
from checkpoint_mcp.upstream.stdio.process import describe_status, group_alive, signal_group

logger = logging.getLogger(__name__)

EXIT_GRACE_SECONDS = 2.0  # after closing the upstream's stdin: how long it has to exit on its own
TERM_GRACE_SECONDS = 2.0  # after SIGTERM to the upstream's process group: how long before SIGKILL
STDOUT_CHECK_SECONDS = 0.5  # how often the tree is asked whether anything but a waiting shell holds our pipe
ABANDONED = "closed its stdout"  # how an upstream ended whose stdout closed while it kept running


class ChildUpstream:
    """The ``Upstream`` of a local server: a child process over its stdin and stdout."""

    def __init__(self, process: LocalProcess) -> None:
        self._process = process
        self._lines = LineSplitter()
        self._sink: UpstreamSink | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._exited: asyncio.Future[int] | None = None
        self._check: asyncio.TimerHandle | None = None
        self._abandoned = False

    @property
    def pid(self) -> int:
        """The shell's pid (and its process group's id)."""
        return self._process.pid

    async def start(self, sink: UpstreamSink) -> None:
        """Pump the already running child's pipes, and learn when it exits (a pidfd, else a thread)."""
        self._sink = sink
        loop = asyncio.get_running_loop()
        proc = self._process
        assert proc.stdin is not None
        assert proc.stdout is not None
        # The exit is watched before the pipes are connected: the read pipe's EOF (a child that exits at once)
        # can be delivered while the write pipe is being connected, and the sink then asks how it ended.
        exited: asyncio.Future[int] = loop.create_future()
        self._exited = exited
        try:
            pidfd = os.pidfd_open(proc.waited)
        except (AttributeError, OSError):
            loop.run_in_executor(None, _wait_into, proc, loop, exited)
        else:

            def reap() -> None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
                if not exited.done():
                    exited.set_result(proc.wait())

            loop.add_reader(pidfd, reap)
        reader, _ = await loop.connect_read_pipe(lambda: Reader(self._data, self._eof), proc.stdout)
        with contextlib.suppress(AttributeError):  # asyncio's pipe transport; uvloop's sizes its reads itself
            reader.max_size = PIPE_READ  # type: ignore[attr-defined]
        self._reader = reader
        writer, _ = await loop.connect_write_pipe(lambda: Writer(sink.pause_client, self._stdin_lost), proc.stdin)
        writer.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._stdin = writer
        if proc.keeps_tree:
            self._check = loop.call_later(STDOUT_CHECK_SECONDS, self._check_stdout, False)

    def _check_stdout(self, suspect: bool) -> None:
        """Treat the stdout as closed when, twice in a row, no process but a waiting shell could write to it."""
        if self._sink is None:
            return
        left = self._process.writer_left()
        if not left and suspect:
            logger.warning("the upstream closed its stdout (only its shell still holds the pipe)")
            self._abandoned = True
            self._eof()
            return
        self._check = asyncio.get_running_loop().call_later(STDOUT_CHECK_SECONDS, self._check_stdout, not left)

    def _data(self, data: bytes) -> None:
        lines = self._lines.feed(data)
        if lines and self._sink is not None:
            self._sink.upstream_lines(lines)

    def _eof(self) -> None:
        if self._check is not None:
            self._check.cancel()
        if self._sink is None:
            return
        sink, self._sink = self._sink, None
        tail = self._lines.flush()
        if tail:
            sink.upstream_lines(tail)
        sink.upstream_closed()

    def _stdin_lost(self) -> None:
        # Writing failed (it closed its stdin); its EOF on stdout will follow.
        logger.debug("the upstream's stdin is closed")

    def send(self, data: bytes) -> None:
        """Write complete lines to the child's stdin (dropped once it is closing)."""
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.write(data)

    def pause_reading(self, paused: bool) -> None:
        """Stop (or resume) reading the child while the client is not reading us."""
        reader = self._reader
        if reader is not None and not reader.is_closing():
            if paused:
                reader.pause_reading()
            else:
                reader.resume_reading()

    async def died(self) -> str:
        """Its stdout closed: wait a moment for the process to exit, and say how it ended."""
        status = await self._exit_status(EXIT_GRACE_SECONDS)
        return ABANDONED if self._abandoned and status == "still running" else status

    async def shutdown(self) -> str:
        """Close its stdin, give it time to exit, then end its whole process group; how it ended."""
        if self._stdin is not None:
            self._stdin.close()
        status = await self._exit_status(EXIT_GRACE_SECONDS)
        if status == "still running":
            logger.info("upstream did not exit after its stdin closed; sending SIGTERM")
        signal_group(self._process.pid, signal.SIGTERM)
        await self._reap_group()
        return describe_status(self._process.returncode) if status == "still running" else status

    def kill(self) -> None:
        """SIGKILL its whole process tree, now."""
        self._process.kill_tree()

    async def _exit_status(self, timeout: float) -> str:
        """Wait up to ``timeout`` for the process to exit; describe how it ended."""
        assert self._exited is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._exited)
        if not self._exited.done():
            return "still running"
        return describe_status(self._process.returncode)

    async def _reap_group(self) -> None:
        """Wait until no process of its tree (without a keeper: of its group) is left, escalating to SIGKILL."""
        pgid = self._process.pid
        assert self._exited is not None
        exited = self._exited
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TERM_GRACE_SECONDS
        while not exited.done() if self._process.keeps_tree else group_alive(pgid):
            if loop.time() >= deadline:
                self.kill()
                deadline = loop.time() + TERM_GRACE_SECONDS
            await asyncio.sleep(0.01)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TERM_GRACE_SECONDS):
                await asyncio.shield(self._exited)
        for transport in (self._reader, self._stdin):
            if transport is not None:
                transport.close()


def _wait_into(proc: LocalProcess, loop: asyncio.AbstractEventLoop, exited: asyncio.Future[int]) -> None:
    """Without pidfds: wait for the child on a thread and report to the loop."""
    code = proc.wait()

    def report() -> None:
        if not exited.done():
            exited.set_result(code)

    loop.call_soon_threadsafe(report)
