"""A minimal stdio MCP server for benchmarks: raw JSON-RPC, no SDK, as cheap per message as Python allows.

It answers ``initialize``, ``server/discover``, ``tools/list``, ``tools/call`` (tool ``echo``: a tiny text result)
and ``ping``; notifications are ignored; any other request gets "method not found". It reads whatever is
available, answers every complete line of it and writes all the answers in one ``write``, so pipelined calls
(many in flight) are served without a round trip each. ``--delay-ms`` makes every ``tools/call`` take that long
without blocking the others (concurrent calls), answered by a timer heap in the same select loop.
``--result-bytes N`` makes the text of every result N bytes long (to see how a proxy's cost grows with size).

Run: ``python benchmarks/upstream_server.py [--delay-ms N] [--result-bytes N]``.
"""

from __future__ import annotations

import heapq
import json
import os
import select
import sys
import time

PROTOCOL_VERSION = "2025-11-25"
SERVER_INFO = {"name": "bench-upstream", "version": "1.0.0"}
TOOL = {
    "name": "echo",
    "description": "Returns a tiny fixed text.",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
}
READ_SIZE = 1 << 16


def _response(ident: object, result_json: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{json.dumps(ident)},"result":{result_json}}}\n'.encode()


_INITIALIZE = json.dumps(
    {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO},
    separators=(",", ":"),
)
_DISCOVER = json.dumps(
    {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    },
    separators=(",", ":"),
)
_TOOLS = json.dumps({"tools": [TOOL]}, separators=(",", ":"))


def call_result(size: int = 0) -> str:
    """The result of every ``tools/call``: a text of ``size`` bytes (``ok`` when 0)."""
    text = "x" * size if size else "ok"
    return json.dumps({"content": [{"type": "text", "text": text}], "isError": False}, separators=(",", ":"))


_FIXED = {"initialize": _INITIALIZE, "server/discover": _DISCOVER, "tools/list": _TOOLS, "ping": "{}"}


def answer(line: bytes, call: str) -> tuple[bytes | None, bool]:
    """The reply to one line (None for none) and whether it is a tools/call (subject to ``--delay-ms``)."""
    try:
        message = json.loads(line)
    except ValueError:
        return b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}\n', False
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None, False  # a notification or a response: nothing to say
    method = message["method"]
    ident = message["id"]
    if method == "tools/call":
        return _response(ident, call), True
    fixed = _FIXED.get(method)
    if fixed is not None:
        return _response(ident, fixed), False
    error = {"code": -32601, "message": f"method not found: {method}"}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode() + b"\n", False


def serve(delay_s: float, call: str) -> None:
    """Serve stdin/stdout until EOF on stdin; ``call`` is the JSON text of every tools/call result."""
    partial = b""
    timers: list[tuple[float, int, bytes]] = []  # (due, tie-breaker, reply)
    counter = 0
    eof = False
    while not eof or timers:
        timeout = max(0.0, timers[0][0] - time.monotonic()) if timers else None
        if not eof:
            ready, _, _ = select.select([0], [], [], timeout)
        else:
            time.sleep(timeout or 0.0)
            ready = []
        out: list[bytes] = []
        if ready:
            chunk = os.read(0, READ_SIZE)
            if not chunk:
                eof = True
            data = partial + chunk
            *lines, partial = data.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                reply, is_call = answer(line, call)
                if reply is None:
                    continue
                if is_call and delay_s > 0:
                    counter += 1
                    heapq.heappush(timers, (time.monotonic() + delay_s, counter, reply))
                else:
                    out.append(reply)
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            out.append(heapq.heappop(timers)[2])
        if out:
            _write_all(b"".join(out))


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


def main(argv: list[str]) -> int:
    """Parse the options (no argparse: it would add to the start-up time) and serve."""
    options = {"--delay-ms": 0.0, "--result-bytes": 0.0}
    if len(argv) % 2 or any(name not in options for name in argv[::2]):
        print("usage: upstream_server.py [--delay-ms N] [--result-bytes N]", file=sys.stderr)
        return 2
    for name, value in zip(argv[::2], argv[1::2], strict=True):
        options[name] = float(value)
    try:
        serve(options["--delay-ms"] / 1000.0, call_result(int(options["--result-bytes"])))
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
