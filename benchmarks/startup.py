"""Start-up and memory: launch-to-``initialize``-reply time, proxy vs the upstream alone; RSS over 100,000 calls.

Start-up: each launch is timed from just before ``Popen`` to the ``initialize`` reply (the request is written at
once, so the proxy's time to start reading counts); launches of the contenders are interleaved. The journaled
proxy reopens the same journal each time (the usual case), after one unmeasured launch that created it.
Every Python process gets a private bytecode cache (``PYTHONPYCACHEPREFIX``, filled by the unmeasured launch), as
an installed package has its ``.pyc`` files; one more contender runs the proxy the way this checkout does when
``PYTHONDONTWRITEBYTECODE`` is set: compiling its own modules from source at every start.

Memory: one journaled and one pass-through proxy serve ``--calls`` calls (32 in flight); their VmRSS is read from
``/proc/<pid>/status`` every ``--sample-every`` calls, and VmHWM (peak) at the end.

Run: ``.venv/bin/python benchmarks/startup.py [--quick] [--launches N] [--calls N] [--no-fastmcp]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import contenders as cs
from harness import Peer, initialize_request, rss_kib
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved

TARGET_ADDED_MS = 80.0
UNCACHED = "checkpoint, no .pyc (compiles its modules)"
FLAT_MIB = 1.0  # allowed RSS growth over the second half of the run


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--launches", type=int, default=30, help="timed launches per contender (default 30)")
    parser.add_argument("--calls", type=int, default=100_000, help="calls for the memory run (default 100,000)")
    parser.add_argument("--sample-every", type=int, default=5000, help="calls between RSS samples (default 5000)")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    cs.src_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.launches, args.calls, args.sample_every = 1, 200, 100
    return args


def time_to_initialize(contender: cs.Contender) -> int:
    """Nanoseconds from launch to the ``initialize`` reply; the process is then closed (not timed)."""
    env = contender.environment()
    start = time.perf_counter_ns()
    peer = Peer(contender.argv, env=env)
    peer.send(initialize_request(1))
    peer.response(1)
    elapsed = time.perf_counter_ns() - start
    peer.close()
    return elapsed


def _cached(contender: cs.Contender, cache: Path) -> cs.Contender:
    env = {**contender.env, "PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": ""}
    return cs.Contender(contender.name, contender.argv, env)


def launches(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    """Start-up milliseconds per contender."""
    cache = tmp / "pycache"
    src = args.src
    chosen = [
        cs.Contender("upstream alone", cs.PLAIN.argv()),
        cs.passthrough(src=src),
        cs.journaled(tmp / "journal.db", src=src),
    ]
    if not args.no_fastmcp:
        python = cs.fastmcp_python()
        assert python is not None
        chosen.append(cs.fastmcp(python))
    chosen = [_cached(contender, cache) for contender in chosen]
    uncached = cs.passthrough(src=src, label=UNCACHED)
    chosen.append(cs.Contender(uncached.name, uncached.argv, {**uncached.env, "PYTHONDONTWRITEBYTECODE": "1"}))
    for contender in chosen:
        time_to_initialize(contender)  # fills the bytecode cache, warms the page cache, creates the journal
    times: dict[str, list[float]] = {c.name: [] for c in chosen}
    for _, contender in interleaved(chosen, args.launches):
        times[contender.name].append(time_to_initialize(contender) / 1e6)
    return times


def memory(args: argparse.Namespace, tmp: Path) -> tuple[list[int], dict[str, list[int]], dict[str, int]]:
    """(calls done at each sample, VmRSS KiB per proxy at each sample, VmHWM KiB per proxy at the end)."""
    chosen = [cs.journaled(tmp / "memory.db", src=args.src), cs.passthrough(src=args.src)]
    peers = {c.name: cs.start(c) for c in chosen}
    done: list[int] = [0]
    rss: dict[str, list[int]] = {name: [rss_kib(peer.pid)[0]] for name, peer in peers.items()}
    peak: dict[str, int] = {}
    try:
        while done[-1] < args.calls:
            for name, peer in peers.items():
                peer.pipelined(args.sample_every, 32)
                rss[name].append(rss_kib(peer.pid)[0])
            done.append(done[-1] + args.sample_every)
        peak = {name: rss_kib(peer.pid)[1] for name, peer in peers.items()}
    finally:
        cs.close_all(peers)
    return done, rss, peak


def render(
    args: argparse.Namespace,
    times: dict[str, list[float]],
    memory_run: tuple[list[int], dict[str, list[int]], dict[str, int]],
) -> str:
    """The tables and the targets."""
    starts = {name: Summary.of(values) for name, values in times.items()}
    alone = starts["upstream alone"].median
    rows = [
        [
            name,
            fmt(s.median, 1),
            fmt(s.minimum, 1),
            fmt(s.maximum, 1),
            "" if name == "upstream alone" else f"+{fmt(s.median - alone, 1)}",
        ]
        for name, s in starts.items()
    ]
    done, rss, peak = memory_run
    names = list(rss)
    marks = sorted({0, 1, len(done) // 4, len(done) // 2, 3 * len(done) // 4, len(done) - 1})
    mem_rows = [[f"{done[i]:,}", *(fmt(rss[name][i] / 1024, 1) for name in names)] for i in marks]
    mem_rows.append(["peak (VmHWM)", *(fmt(peak[name] / 1024, 1) for name in names)])
    half = len(done) // 2
    growth = {name: (rss[name][-1] - rss[name][half]) / 1024 for name in names}
    added = starts["checkpoint"].median - alone
    added_journal = starts["journaled"].median - alone
    targets = [
        Target(
            "start-up adds ≤ 80 ms to the upstream's own (pass-through)",
            f"+{fmt(added, 1)} ms",
            added <= TARGET_ADDED_MS,
        ),
        Target(
            "start-up adds ≤ 80 ms to the upstream's own (journaled)",
            f"+{fmt(added_journal, 1)} ms",
            added_journal <= TARGET_ADDED_MS,
        ),
    ]
    for name in names:
        targets.append(
            Target(
                f"memory flat over {args.calls:,} calls ({name})",
                f"{growth[name]:+.2f} MiB over the last {done[-1] - done[half]:,} calls",
                abs(growth[name]) <= FLAT_MIB,
            )
        )
    return "\n".join(
        [
            f"Start-up: {args.launches} interleaved launches per contender, launch to `initialize` reply.",
            "",
            table(["Contender", "median ms", "min ms", "max ms", "added vs upstream alone"], rows),
            "",
            f"Memory: VmRSS (MiB) of the proxy process while it serves {args.calls:,} calls, 32 in flight.",
            "",
            table(["calls served", *names], mem_rows),
            "",
            targets_table(targets),
        ]
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "startup") as tmp:
        where = machine(tmp)
        times = launches(args, tmp)
        memory_run = memory(args, tmp)
        body = render(args, times, memory_run)
    publish(args, "startup", title="Start-up time and memory", argv=argv, where=where, body=body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
