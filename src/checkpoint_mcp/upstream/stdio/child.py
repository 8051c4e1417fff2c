"""A stdio upstream: the child process started by ``process.spawn``, pumped line by line.

Its lifecycle, every wait bounded: at shutdown its stdin is closed, it has ``EXIT_GRACE_SECONDS`` to exit on its
own, then its tree is asked to stop (SIGTERM to its process group) and, ``TERM_GRACE_SECONDS`` later, killed
whole; ``TERM_GRACE_SECONDS`` after that it is given up on, whatever its members still say. When its stdout closes
it is gone: whatever is left of its tree is killed the same way. Under a keeper, its stdout also counts as closed
when no process of the tree but a shell waiting for its children still holds it (checked every
``STDOUT_CHECK_SECONDS``, twice in a row): such a shell would otherwise keep the pipe open forever. If the proxy
itself is killed, the tree goes with it the platform's way (``tree.py``). Its pipes are pumped by the loop or by
threads (``platforms.stdio``); its exit is watched by a pidfd or a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading

from checkpoint_mcp.platforms import stdio
from checkpoint_mcp.upstream.base import UpstreamSink
from checkpoint_mcp.upstream.stdio import procfs
from checkpoint_mcp.upstream.stdio.pipes import PIPE_READ, WRITE_BUFFER_HIGH, LineSplitter, Reader, Writer
from checkpoint_mcp.upstream.stdio.process import describe_status
from checkpoint_mcp.upstream.stdio.tree import LocalProcess

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
        pidfd = procfs.open_pidfd(proc.watched_pid)
        if pidfd is None:
            threading.Thread(target=_wait_into, args=(proc, loop, exited), name="upstream-exit", daemon=True).start()
        else:

            def reap() -> None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
                if not exited.done():
                    exited.set_result(proc.wait())

            loop.add_reader(pidfd, reap)
        self._reader = await stdio.connect_read(loop, Reader(self._data, self._eof), proc.stdout, max_size=PIPE_READ)
        writer = await stdio.connect_write(loop, Writer(sink.pause_client, self._stdin_lost), proc.stdin)
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
        """Close its stdin, give it time to exit, then end its whole process tree; how it ended."""
        if self._stdin is not None:
            self._stdin.close()
        status = await self._exit_status(EXIT_GRACE_SECONDS)
        if status == "still running":
            logger.info("upstream did not exit after its stdin closed; asking its process tree to stop")
        self._process.terminate()
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
        """Wait until no process of its tree is left, escalating to a kill, and giving up (with a warning)
        ``TERM_GRACE_SECONDS`` after the kill: what is left then can no longer be waited for."""
        assert self._exited is not None
        process = self._process
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TERM_GRACE_SECONDS
        killed = False
        while process.tree_alive():
            if loop.time() >= deadline:
                if killed:
                    logger.warning("the upstream's process tree (pid %d) is still there after a kill", process.pid)
                    break
                self.kill()
                killed = True
                deadline = loop.time() + TERM_GRACE_SECONDS
            await asyncio.sleep(0.01)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TERM_GRACE_SECONDS):
                await asyncio.shield(self._exited)
        process.close()
        for transport in (self._reader, self._stdin):
            if transport is not None:
                transport.close()


def _wait_into(proc: LocalProcess, loop: asyncio.AbstractEventLoop, exited: asyncio.Future[int]) -> None:
    """Without pidfds: wait for the child on a (daemon) thread and report to the loop."""
    code = proc.wait()

    def report() -> None:
        if not exited.done():
            exited.set_result(code)

    stdio.call_from_thread(loop, report)
