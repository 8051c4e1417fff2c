"""The benchmark client: raw newline-delimited JSON-RPC over a child's pipes, timed with ``perf_counter_ns``.

No MCP SDK, no threads, no asyncio in the timed path: a request is one ``os.write`` of prepared bytes, and the
answer is read with ``os.read`` into a private buffer. Every answer is checked (id and ``result``) after the clock
has stopped, so a broken contender fails loudly instead of looking fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

READ_SIZE = 1 << 16
DEFAULT_TIMEOUT = 60.0
PROTOCOL_VERSION = "2025-11-25"
_ID = re.compile(rb'"id":\s*(\d+)')

RequestMaker = Callable[[int], bytes]
"""id -> one request line (with its newline)."""


class PeerError(RuntimeError):
    """The child misbehaved: it exited, timed out, or sent a wrong answer."""


def echo_call(ident: int) -> bytes:
    """A ``tools/call`` of the bundled upstream's ``echo`` tool; the argument varies so signatures do too."""
    template = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"n":%d}}}\n'
    return template % (ident, ident)


def seq_call(ident: int, seq: int, n: int) -> bytes:
    """A ``tools/call`` of ``echo`` pinned to journal sequence ``seq`` (``_meta.checkpoint_seq``)."""
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"n":%d},'
        b'"_meta":{"checkpoint_seq":%d}}}\n' % (ident, n, seq)
    )


def initialize_request(ident: int) -> bytes:
    """The ``initialize`` request every benchmark client sends first."""
    params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "initialize", "params": params}).encode() + b"\n"


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


class Peer:
    """A child process that speaks JSON-RPC lines on its stdin/stdout."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, stderr: Any = None) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if stderr is None else stderr,
            env=env,
            bufsize=0,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._to = self.proc.stdin.fileno()
        self._from = self.proc.stdout.fileno()
        self._buffer = bytearray()
        self._poll = select.poll()
        self._poll.register(self._from, select.POLLIN)
        self._next_id = 1

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.proc.pid

    def next_id(self) -> int:
        """A fresh request id."""
        ident = self._next_id
        self._next_id += 1
        return ident

    # ---- raw I/O -----------------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Write all of ``data`` to the child's stdin."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._to, view) :]

    def _fill(self, timeout: float) -> None:
        if not self._poll.poll(timeout * 1000):
            raise PeerError(f"no answer within {timeout:.0f}s from {self.argv[:3]}")
        chunk = os.read(self._from, READ_SIZE)
        if not chunk:
            raise PeerError(f"{self.argv[:3]} closed its stdout (exit status {self.proc.poll()})")
        self._buffer += chunk

    def read_line(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        """The next complete line."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[: end + 1])
                del self._buffer[: end + 1]
                return line
            self._fill(timeout)

    def read_available(self, timeout: float = DEFAULT_TIMEOUT) -> list[bytes]:
        """At least one complete line: everything complete that has arrived so far."""
        while True:
            end = self._buffer.rfind(b"\n")
            if end >= 0:
                lines = bytes(self._buffer[: end + 1]).splitlines()
                del self._buffer[: end + 1]
                return lines
            self._fill(timeout)

    # ---- messages ----------------------------------------------------------------------------------------

    def response(self, ident: int, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The parsed response with ``ident``; other lines (notifications) are skipped."""
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.read_line(max(0.01, deadline - time.monotonic())))
            if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
                return message

    def initialize(self) -> dict[str, Any]:
        """The MCP handshake; returns the ``initialize`` result."""
        ident = self.next_id()
        self.send(initialize_request(ident))
        reply = self.response(ident)
        if "result" not in reply:
            raise PeerError(f"initialize failed: {reply}")
        self.send(INITIALIZED)
        return dict(reply["result"])

    def timed_call(self, make: RequestMaker = echo_call) -> int:
        """One request/response round trip in nanoseconds; the answer is checked after the clock stops."""
        ident = self.next_id()
        request = make(ident)
        start = time.perf_counter_ns()
        self.send(request)
        line = self.read_line()
        elapsed = time.perf_counter_ns() - start
        check_answer(line, ident)
        return elapsed

    def pipelined(self, count: int, in_flight: int, make: RequestMaker = echo_call) -> tuple[int, list[int]]:
        """Send ``count`` requests keeping ``in_flight`` outstanding; (total ns, per-call latencies in ns).

        Answers are matched to requests by id (a cheap regex, not a JSON parse, to keep the client light).
        """
        sent: dict[int, int] = {}
        latencies: list[int] = []
        remaining = count
        start = time.perf_counter_ns()
        first = min(in_flight, count)
        self._send_batch(first, make, sent)
        remaining -= first
        while len(latencies) < count:
            lines = self.read_available()
            now = time.perf_counter_ns()
            for line in lines:
                match = _ID.search(line)
                if match is None or b'"result"' not in line:
                    raise PeerError(f"unexpected line in a pipelined run: {line[:300]!r}")
                latencies.append(now - sent.pop(int(match.group(1))))
            refill = min(len(lines), remaining)
            if refill:
                self._send_batch(refill, make, sent)
                remaining -= refill
        return time.perf_counter_ns() - start, latencies

    def _send_batch(self, count: int, make: RequestMaker, sent: dict[int, int]) -> None:
        requests = []
        now = time.perf_counter_ns()
        for _ in range(count):
            ident = self.next_id()
            sent[ident] = now
            requests.append(make(ident))
        self.send(b"".join(requests))

    def close(self, timeout: float = 15.0) -> int | None:
        """Close the child's stdin (client EOF) and wait for it to exit; kill it if it does not."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            return None
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()


def check_answer(line: bytes, ident: int) -> None:
    """Raise unless ``line`` is a successful response to request ``ident``."""
    message = json.loads(line)
    if not isinstance(message, dict) or message.get("id") != ident or "result" not in message:
        raise PeerError(f"unexpected answer to request {ident}: {line[:300]!r}")
    result = message["result"]
    if isinstance(result, dict) and result.get("isError"):
        raise PeerError(f"the tool failed: {line[:300]!r}")


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB, from ``/proc/<pid>/status``."""
    values = {"VmRSS:": 0, "VmHWM:": 0}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for row in status:
            fields = row.split()
            if fields and fields[0] in values:
                values[fields[0]] = int(fields[1])
    return values["VmRSS:"], values["VmHWM:"]
