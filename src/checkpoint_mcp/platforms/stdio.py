"""Pipes pumped into asyncio protocols: by the event loop where it can watch them, else by a thread per end.

POSIX event loops watch pipes (``connect_read_pipe``/``connect_write_pipe``); Windows' Proactor loop cannot watch
an inherited standard handle or a child's anonymous pipe, and under ``CHECKPOINT_PORTABLE=1`` Linux takes the same
path. There a thread per pipe end does the blocking reads or writes and hands over to the loop, behind the same
``asyncio.ReadTransport`` / ``WriteTransport`` interface, so the protocols (``upstream.stdio.pipes``: the line
readers and writers) are the same either way, backpressure included:

* a reader thread reads only while the protocol has not paused it (at most one chunk is on its way when it does);
* a writer thread writes what the loop queued, in order; past the high-water mark the protocol is paused, and
  resumed once the queue is back under the low one.

The threads are daemons and own their file while they run: a thread blocked on a pipe nobody writes to (a client
that keeps stdin open) never holds up the process's exit, and a file is closed only once its thread is done with
it, so its descriptor cannot be reused under a blocked read.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import sys
import threading
from typing import IO, Any, Final

from checkpoint_mcp.platforms.host import HOST

DEFAULT_HIGH: Final = 1 << 16


def call_from_thread(loop: asyncio.AbstractEventLoop, callback: Any, *args: Any) -> None:
    """Hand ``callback(*args)`` to ``loop`` from another thread; nothing if the loop is closed (nobody listens)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback, *args)


async def connect_read(
    loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, file: IO[bytes], *, max_size: int
) -> asyncio.ReadTransport:
    """Pump ``file`` into ``protocol``: by the loop where it can watch it, else by a thread (which also reads regular
    files and devices an event loop refuses, such as ``/dev/null``)."""
    if HOST.loop_pipes and _pollable(file.fileno()):
        with contextlib.suppress(ValueError):
            transport, _ = await loop.connect_read_pipe(lambda: protocol, file)
            with contextlib.suppress(AttributeError):  # asyncio's pipe transport; uvloop sizes its reads itself
                transport.max_size = max_size  # type: ignore[attr-defined]
            return transport
    return ThreadReader(loop, protocol, file, max_size)


async def connect_write(
    loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, file: IO[bytes]
) -> asyncio.WriteTransport:
    """Pump what is written to the transport into ``file``: by the loop where it can, else by a thread."""
    if HOST.loop_pipes:
        with contextlib.suppress(ValueError):  # a regular file: the loop refuses it
            transport, _ = await loop.connect_write_pipe(lambda: protocol, file)
            return transport
    return ThreadWriter(loop, protocol, file)


class ThreadReader(asyncio.ReadTransport):
    """A read end pumped by a daemon thread into ``protocol`` on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, file: IO[bytes], size: int):
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._file = file
        self._size = size
        self._reading = threading.Event()
        self._reading.set()
        self._closing = False
        self._lock = threading.Lock()
        self._thread_done = False
        self._ended = False  # EOF or loss reported to the protocol
        loop.call_soon(protocol.connection_made, self)
        threading.Thread(target=self._pump, name="pipe-reader", daemon=True).start()

    def _pump(self) -> None:
        fd = self._file.fileno()
        error: OSError | None = None
        while True:
            self._reading.wait()
            if self._closing:
                break
            try:
                data = os.read(fd, self._size)
            except OSError as exc:
                error = exc
                break
            if not data:
                break
            call_from_thread(self._loop, self._deliver, data)
        with self._lock:
            self._thread_done = True
            close = self._closing
        if close:
            self._file.close()
        call_from_thread(self._loop, self._end, error)

    def _deliver(self, data: bytes) -> None:
        if not self._closing:
            self._protocol.data_received(data)

    def _end(self, error: OSError | None) -> None:
        if self._ended:
            return
        self._ended = True
        if not self._closing and error is None:
            self._protocol.eof_received()
        self._protocol.connection_lost(error)

    def is_reading(self) -> bool:
        return self._reading.is_set() and not self._closing

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Stop handing data on; the file is closed once the thread is done with it."""
        if self._closing:
            return
        self._closing = True
        self._reading.set()  # a paused thread wakes, sees the closing, and ends
        with self._lock:
            done = self._thread_done
        if done:
            self._file.close()
        if not self._ended:
            self._ended = True
            self._loop.call_soon(self._protocol.connection_lost, None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"pipe": self._file}.get(name, default)


class ThreadWriter(asyncio.WriteTransport):
    """A write end whose blocking writes a daemon thread makes, in order, from what the loop queued."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: asyncio.Protocol, file: IO[bytes]) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._file = file
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._high = DEFAULT_HIGH
        self._low = DEFAULT_HIGH // 4
        self._paused = False
        self._closing = False
        self._lost = False
        self._ready = threading.Condition()
        loop.call_soon(protocol.connection_made, self)
        threading.Thread(target=self._pump, name="pipe-writer", daemon=True).start()

    def _pump(self) -> None:
        fd = self._file.fileno()
        error: OSError | None = None
        while True:
            with self._ready:
                while not self._queue and not self._closing:
                    self._ready.wait()
                if not self._queue:
                    break  # closing, and everything is written
                data = self._queue[0]
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                error = exc
                break
            with self._ready:
                self._queue.popleft()
                self._queued -= len(data)
                left = self._queued
            if left <= self._low:
                call_from_thread(self._loop, self._maybe_resume)
        with self._ready:
            self._queue.clear()
            self._queued = 0
        with contextlib.suppress(OSError):
            self._file.close()
        call_from_thread(self._loop, self._end, error)

    def _maybe_resume(self) -> None:
        if self._paused and self._queued <= self._low:
            self._paused = False
            self._protocol.resume_writing()

    def _end(self, error: OSError | None) -> None:
        if not self._lost:
            self._lost = True
            self._closing = True
            self._protocol.connection_lost(error)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing or not data:
            return
        with self._ready:
            self._queue.append(bytes(data))
            self._queued += len(data)
            queued = self._queued
            self._ready.notify()
        if queued > self._high and not self._paused:
            self._paused = True
            self._protocol.pause_writing()

    def get_write_buffer_size(self) -> int:
        return self._queued

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = DEFAULT_HIGH if high is None else high
        self._low = self._high // 4 if low is None else low

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Write what is queued, then close the file (on the thread)."""
        with self._ready:
            self._closing = True
            self._ready.notify()

    def abort(self) -> None:
        """Drop what is queued and close."""
        with self._ready:
            self._queue.clear()
            self._queued = 0
            self._closing = True
            self._ready.notify()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"pipe": self._file}.get(name, default)


if sys.platform == "linux":
    import select

    def _pollable(fd: int) -> bool:
        """Whether epoll can watch ``fd`` (it refuses regular files and some devices, like /dev/null)."""
        with select.epoll() as probe:
            try:
                probe.register(fd, select.EPOLLIN)
            except OSError:
                return False
        return True

else:

    def _pollable(fd: int) -> bool:
        """Whether the loop can watch ``fd``: it says so itself (``connect_read_pipe`` refuses what it cannot)."""
        return True
