"""Where the HTTP paths' time goes: py-spy samples of `checkpoint serve` or `checkpoint --upstream-url` under load.

``--path serve``: the gateway (pass-through, journaled to SQLite with ``--journaled``, or to PostgreSQL with
``--postgres``, whose commits run on the committer's thread: its samples are left out, see ``analyse``) in front
of the bundled stdio upstream, loaded by ``--clients`` concurrent HTTP clients of ``gateway.py`` (2026-07-28 POSTs
on one workflow). ``--path remote``: the stdio proxy in front of ``http_upstream.py``, driven with ``--in-flight`` calls
outstanding by the stdio benchmark client. py-spy samples the process's main thread; the samples are bucketed by
what it was doing (HTTP parsing, routing, the interceptor, the journal, the HTTP client, the event loop, idle) and
printed as microseconds of main-thread time per call.

Run: ``.venv/bin/python benchmarks/profile_http.py --path serve [--journaled | --postgres] [--seconds 6]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import contenders as cs
import gateway as gw
import remote as rm
from profile_proxy import analyse, py_spy
from report import table
from stats import fmt

# (category, frame pattern), tried from the leaf towards the root: the first frame that matches decides.
RULES: list[tuple[str, re.Pattern[str]]] = [
    ("idle (epoll)", re.compile(r"^(epoll_wait|EpollSelector\.select) ")),
    ("fsync in COMMIT", re.compile(r"^(fdatasync|fsync) ")),
    ("SQLite statements", re.compile(r"^(sqlite3|pysqlite|_pysqlite|stmt_step|_SqliteBatch\.|SqliteJournal\.)")),
    ("socket and pipe I/O (syscalls)", re.compile(r"^(_\w+Transport\.(write|_read_ready\w*|_write_ready)) ")),
    ("JSON parse (classify)", re.compile(r"^classify ")),
    ("signature", re.compile(r"^call_signature ")),
    ("journal (SQL journal, unit of work, chain)", re.compile(r"journal/\w+\.py")),
    ("metrics (prometheus_client)", re.compile(r"prometheus_client/")),
    ("HTTP/1.1 parsing and framing (h11)", re.compile(r"h11")),
    ("HTTP/1.1 parsing (httptools)", re.compile(r"httptools")),
    ("uvloop's C code: I/O and waiting (not sampled inside)", re.compile(r"^Runner\.run ")),
    ("HTTP client: aiohttp", re.compile(r"aiohttp/")),
    ("HTTP client: httpcore", re.compile(r"httpcore")),
    ("HTTP client: httpx", re.compile(r"httpx")),
    ("uvicorn", re.compile(r"uvicorn/")),
    ("server: Starlette routing and middleware", re.compile(r"starlette/")),
    ("server: guards (security.py)", re.compile(r"gateway/security\.py")),
    ("server: MCP endpoint", re.compile(r"gateway/endpoint\.py")),
    ("gateway channel and streams", re.compile(r"gateway/(channel|streams|sessions)\.py")),
    ("interceptor and calls", re.compile(r"intercept/\w+\.py")),
    ("remote upstream (remote, exchange, headers, sse)", re.compile(r"upstream/http/\w+\.py")),
    ("stdio relay and child", re.compile(r"(proxy/relay|upstream/stdio/\w+)\.py")),
    ("asyncio event loop", re.compile(r"asyncio/")),
]


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", choices=["serve", "remote"], default="serve")
    parser.add_argument("--journaled", action="store_true", help="journal to SQLite")
    parser.add_argument(
        "--postgres", action="store_true", help="serve: journal to PostgreSQL (a server from the embedded wheel)"
    )
    parser.add_argument("--pg-url", default=None, help="with --postgres: this database instead of a new server")
    parser.add_argument("--seconds", type=float, default=6.0, help="how long py-spy samples")
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--clients", type=int, default=64, help="serve: concurrent HTTP clients")
    parser.add_argument("--in-flight", type=int, default=32, help="remote: calls outstanding (1: sequential)")
    parser.add_argument("--top", type=int, default=20, help="leaf functions listed")
    parser.add_argument("--out", type=Path, default=None, help="keep the collapsed stacks in this file")
    return parser.parse_args(argv)


def spy(pid: int, args: argparse.Namespace, raw: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(args.seconds)),
            "--rate",
            str(args.rate),
            "--idle",
            "--format",
            "raw",
            "--output",
            str(raw),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def profile_serve(args: argparse.Namespace, tmp: Path, raw: Path) -> tuple[int, float]:
    if not args.postgres:
        return load_serve(args, raw, str(tmp / "j.db") if args.journaled else None)
    with gw.postgres(args) as (url, _):
        return load_serve(args, raw, url)


def load_serve(args: argparse.Namespace, raw: Path, journal: str | None) -> tuple[int, float]:
    served = gw.start_serve("serve", 1, journal)
    try:
        asyncio.run(gw.load(served.endpoints, True, args.clients, 0.5, 1.0))  # warm-up
        recorder = spy(served.procs[0].pid, args, raw)
        time.sleep(0.5)
        rate, samples = asyncio.run(gw.load(served.endpoints, True, args.clients, 0.0, args.seconds))
        recorder.wait()
    finally:
        served.stop()
    return len(samples), len(samples) / rate


def profile_remote(args: argparse.Namespace, tmp: Path, raw: Path) -> tuple[int, float]:
    with rm.http_upstream() as port:
        url = f"http://127.0.0.1:{port}/mcp"
        contender = rm.stdio_contenders(url, tmp, False)[1 if args.journaled else 0]
        peer = cs.start(contender)
        try:
            peer.pipelined(args.in_flight * 4, args.in_flight)
            recorder = spy(peer.pid, args, raw)
            time.sleep(0.5)
            calls, began = 0, time.perf_counter()
            while recorder.poll() is None:
                if args.in_flight == 1:
                    for _ in range(100):
                        peer.timed_call()
                else:
                    peer.pipelined(500, args.in_flight)
                calls += 100 if args.in_flight == 1 else 500
            seconds = time.perf_counter() - began
        finally:
            peer.close()
    return calls, seconds


def main(argv: list[str]) -> int:
    """Profile one HTTP path under load and print where its main thread's time goes."""
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="bench-profile-http-") as tmp_name:
        tmp = Path(tmp_name)
        raw = args.out or tmp / "profile.txt"
        calls, seconds = (profile_serve if args.path == "serve" else profile_remote)(args, tmp, raw)
        categories, leaves, total = analyse(raw, RULES)
    mode = "journaled to PostgreSQL" if args.postgres else "journaled" if args.journaled else "pass-through"
    print(
        f"{args.path} ({mode}): {calls:,} calls in {seconds:.1f}s ({calls / seconds:,.0f} calls/s), {total} samples\n"
    )
    per_sample_us = seconds * 1e6 / max(total, 1)
    rows = [[n, f"{c / total:.1%}", fmt(c * per_sample_us / calls, 1)] for n, c in categories.most_common()]
    print(table(["Where the main thread was", "share", "µs per call"], rows))
    print()
    print(
        table(
            ["Leaf frame (self time)", "share"],
            [[f"`{n}`", f"{c / total:.1%}"] for n, c in leaves.most_common(args.top)],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
