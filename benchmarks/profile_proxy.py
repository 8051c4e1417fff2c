"""Where a proxy's time goes: py-spy samples of ``checkpoint`` under a sequential or a pipelined load.

The script starts one proxy (pass-through or journaled) in front of the bundled upstream, drives it with the
benchmark client, and attaches ``py-spy record --native --idle`` to it (native stacks need py-spy to pause the
process for each sample, so keep ``--rate`` modest). It keeps the collapsed
stacks (``--out``, openable in speedscope or flamegraph.pl) and prints the proxy's main-thread time per call,
bucketed by what it was doing: fsync, SQLite statements, JSON parsing, the signature, the result splice, pipe
I/O, the event loop, idle. The asyncio child-watcher thread (parked in ``waitpid``) is left out.

Kernel time is told apart from the code that asked for it. py-spy sees no kernel frames: a sample taken inside a
system call ends in libc's wrapper (``pwrite64``, ``fcntl64``, ``write``), under the frames that called it. So a
sample whose leaf is such a wrapper goes to its category's kernel bucket (``SQLite statements`` under
``pwrite64`` is SQLite's system calls, not its CPU). And before py-spy attaches, the proxy runs ``--cpu-seconds``
under the same load alone, and its user and system CPU per call are read from ``/proc/<pid>/stat`` (all its
threads; its upstream is another process), unperturbed by the sampling.

Run: ``.venv/bin/python benchmarks/profile_proxy.py --load pipelined --contender journaled [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import contenders as cs
from harness import Peer
from report import table
from stats import fmt

# (category, frame-name pattern), tried from the leaf frame towards the root: the first frame that matches any
# rule decides the sample's category.
RULES: list[tuple[str, re.Pattern[str]]] = [
    ("idle: waiting for input (epoll)", re.compile(r"^epoll_wait ")),
    ("fsync in COMMIT", re.compile(r"^(fdatasync|fsync) ")),
    ("signature (RFC 8785 + SHA-256)", re.compile(r"^call_signature ")),
    ("result splice (member_text, set_member)", re.compile(r"^(member_text|set_member|Interceptor\._annotated) ")),
    ("JSON parse of each line (classify)", re.compile(r"^classify ")),
    ("timestamps (utc_now)", re.compile(r"^utc_now ")),
    ("json dumps (arguments, _meta)", re.compile(r"^dumps \(checkpoint_mcp")),
    (
        "SQLite statements (user CPU)",
        re.compile(r"^(sqlite3|pysqlite|_pysqlite|stmt_step|_SqliteBatch\.|SqliteJournal\.)"),
    ),
    ("pipe write", re.compile(r"^(_UnixWritePipeTransport\.write|_write_client|Relay\._write_client) ")),
    ("pipe read", re.compile(r"^(os_read|_UnixReadPipeTransport\._read_ready) ")),
    ("line splitting", re.compile(r"^LineSplitter\.")),
    ("interceptor bookkeeping (rest)", re.compile(r"^(Interceptor\.|_LazyBatch\.|_InFlight|ClientBatch)")),
    ("relay (rest)", re.compile(r"^(Relay\.|Reader\.|Writer\.|ChildUpstream\.)")),
    ("asyncio event loop", re.compile(r"asyncio/")),
]
OTHER = "other"
_LINE = re.compile(r":\d+\)$")
# A leaf frame that is libc's wrapper of a system call: the sample was taken in the kernel (or on its way in).
SYSTEM_CALL = re.compile(
    r"^(?:__libc_|__GI___libc_|__GI___|__)?(?:p?write|p?read|writev|readv|fcntl|fsync|fdatasync|lseek|fstat|fstatat"
    r"|stat|lstat|openat|open|close|unlink|access|ftruncate|mmap|munmap|mremap|madvise|futex\w*|epoll_wait"
    r"|epoll_ctl|getpid|syscall|sendto|recvfrom|send|recv)(?:64)?(?:_nocancel)? \(libc[.-]"
)
IN_KERNEL = " → system calls (kernel)"
KERNEL_NAMES = {"SQLite statements (user CPU)": "SQLite's system calls (kernel: pwrite, fcntl locks, reads)"}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", choices=["sequential", "pipelined"], default="sequential")
    parser.add_argument("--contender", choices=["checkpoint", "journaled"], default="journaled")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long py-spy samples (default 10)")
    parser.add_argument("--rate", type=int, default=250, help="samples per second (default 250)")
    parser.add_argument("--in-flight", type=int, default=32, help="for --load pipelined (default 32)")
    parser.add_argument("--out", type=Path, default=None, help="keep the collapsed stacks in this file")
    parser.add_argument("--candidate", type=Path, default=None, help="profile the proxy from this src/ tree")
    parser.add_argument("--top", type=int, default=25, help="how many functions to list by self time")
    parser.add_argument(
        "--cpu-seconds", type=float, default=3.0, help="load without py-spy first, for the /proc CPU split (default 3)"
    )
    return parser.parse_args(argv)


def py_spy() -> str:
    """The py-spy executable (``pip install py-spy``)."""
    here = Path(sys.executable).parent / "py-spy"
    found = str(here) if here.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


def drive(peer: Peer, args: argparse.Namespace, done: Callable[[], bool]) -> tuple[int, float]:
    """Load the proxy until ``done()``; (calls made, seconds)."""
    calls = 0
    start = time.perf_counter()
    while not done():
        if args.load == "sequential":
            for _ in range(100):
                peer.timed_call()
            calls += 100
        else:
            peer.pipelined(1000, args.in_flight)
            calls += 1000
    return calls, time.perf_counter() - start


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far, all its threads, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime and stime: fields 14 and 15 of proc(5)


def cpu_split(peer: Peer, args: argparse.Namespace) -> tuple[int, float, float]:
    """Load the proxy for ``--cpu-seconds`` with nothing attached: (calls, user µs per call, system µs per call)."""
    user, system = cpu_times(peer.pid)
    deadline = time.perf_counter() + args.cpu_seconds
    calls, _ = drive(peer, args, lambda: time.perf_counter() >= deadline)
    user_after, system_after = cpu_times(peer.pid)
    return calls, (user_after - user) * 1e6 / calls, (system_after - system) * 1e6 / calls


def categorize(frames: list[str], rules: list[tuple[str, re.Pattern[str]]] = RULES) -> str:
    """The category of one sample's stack (root first): the first of ``rules`` matched from the leaf up; when the
    leaf is a system call and a frame above it decided, that category's kernel bucket (``KERNEL_NAMES``)."""
    for depth, frame in enumerate(reversed(frames)):
        for name, pattern in rules:
            if pattern.search(frame):
                if depth > 0 and SYSTEM_CALL.search(frames[-1]):
                    return KERNEL_NAMES.get(name, name + IN_KERNEL)
                return name
    return OTHER + IN_KERNEL if frames and SYSTEM_CALL.search(frames[-1]) else OTHER


def analyse(
    raw: Path, rules: list[tuple[str, re.Pattern[str]]] = RULES
) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """(samples per category, samples per leaf Python function, main-thread samples) of a collapsed-stack file."""
    categories: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for row in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count_text = row.rpartition(" ")
        if "ThreadedChildWatcher" in stack or "_do_waitpid" in stack or "_bootstrap " in stack.split(";")[0]:
            continue  # helper threads
        count = int(count_text)
        frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
        total += count
        categories[categorize(frames, rules)] += count
        python_frames = [f for f in frames if ".py)" in f or "(<string>)" in f]
        leaf = frames[-1] if not python_frames or frames[-1] in python_frames else f"{python_frames[-1]} → native"
        leaves[leaf] += count
    return categories, leaves, total


def record(args: argparse.Namespace, tmp: Path, raw: Path) -> tuple[int, float, tuple[int, float, float] | None]:
    """Run the proxy under load alone (``cpu_split``), then with py-spy attached, writing collapsed stacks to
    ``raw``; (calls, seconds) of the sampled part and the CPU split (None with ``--cpu-seconds 0``)."""
    if args.contender == "journaled":
        contender = cs.journaled(tmp / "journal.db", src=args.candidate)
    else:
        contender = cs.passthrough(src=args.candidate)
    peer = cs.start(contender)
    try:
        for _ in range(300):
            peer.timed_call()
        split = cpu_split(peer, args) if args.cpu_seconds > 0 else None
        spy = subprocess.Popen(
            [
                py_spy(),
                "record",
                "--pid",
                str(peer.pid),
                "--duration",
                str(int(args.seconds)),
                "--rate",
                str(args.rate),
                "--native",
                "--idle",
                "--format",
                "raw",
                "--output",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)  # let py-spy attach
        calls, seconds = drive(peer, args, lambda: spy.poll() is not None)
    finally:
        peer.close()
    _, spy_errors = spy.communicate()
    if spy.returncode != 0 or not raw.exists():
        raise SystemExit(f"py-spy failed ({spy.returncode}): {spy_errors.decode(errors='replace')}")
    return calls, seconds, split


def main(argv: list[str]) -> int:
    """Profile one proxy under one load and print where its time goes."""
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp_name:
        tmp = Path(tmp_name)
        raw = args.out or tmp / "profile.txt"
        calls, seconds, split = record(args, tmp, raw)
        categories, leaves, total = analyse(raw)
    kept = f"stacks in {raw}" if args.out else "stacks not kept (--out FILE keeps them)"
    per_sample_us = seconds * 1e6 / max(total, 1)  # main-thread wall time one sample stands for
    print(
        f"{args.contender} under a {args.load} load: {calls:,} calls in {seconds:.1f}s "
        f"({calls / seconds:,.0f} calls/s), {total:,} main-thread samples; {kept}\n"
    )
    rows = [
        [name, f"{count / total:.1%}", fmt(count * per_sample_us / calls, 1)]
        for name, count in categories.most_common()
    ]
    print(table(["Where the proxy's main thread was", "share", "µs per call"], rows))
    if split is not None:
        split_calls, user_us, system_us = split
        print(
            f"\nCPU of the proxy process without py-spy ({split_calls:,} calls, /proc/<pid>/stat, all threads): "
            f"{fmt(user_us + system_us, 1)} µs per call, of which user {fmt(user_us, 1)} µs and kernel "
            f"{fmt(system_us, 1)} µs ({system_us / max(user_us + system_us, 1e-9):.0%}); a clock tick is "
            f"{1e6 / os.sysconf('SC_CLK_TCK') / split_calls:.2f} µs per call."
        )
    print()
    rows = [[f"`{name}`", f"{count / total:.1%}"] for name, count in leaves.most_common(args.top)]
    print(table(["Leaf frame (self time)", "share"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
