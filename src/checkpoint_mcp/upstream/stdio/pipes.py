"""Newline-delimited JSON over pipes: a line splitter and the asyncio protocols of both pumps' pipe ends.

MCP's stdio framing is one JSON-RPC message per line. Both pipe pumps (the client's stdio in ``relay.py``, a
stdio upstream in ``child.py``) read chunks, split them here into complete lines, and pause the other side when a
write end fills up (backpressure), so memory stays bounded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

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


class Reader(asyncio.Protocol):
    """A read end that hands every chunk on, and reports its end once per cause (EOF, loss)."""

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


class Writer(asyncio.Protocol):
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
