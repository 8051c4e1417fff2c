"""The journaled call's own CPU, this tree against older ones, in one run (issue 30): the stdio proxy's CPU per call
(``/proc/<pid>/schedstat`` run time, and ``/proc/<pid>/stat``'s user and system split), its median latency alone,
and its calls/s with 32 in flight.

Every tree's proxy journals to its own SQLite file in the same directory, and all are measured in interleaved
rounds (a fresh random order each round), so a noisy moment of the shared machine hits them alike. The older trees
come from this checkout's git history (``git archive REV src``).

Run: ``.venv/bin/python benchmarks/journaled_cpu.py [--before REV ...] [--rounds N] [--calls N] [--quick]``
(default: the tree before issue 30's first change, 76f931e).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import contenders as cs
from harness import Peer
from report import common_arguments, machine, publish, scratch_dir, table

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "76f931e"  # main before issue 30's first change (the merge 8b4dcf9's first parent)
THIS = "this tree"


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--before", action="append", default=None, help=f"git ref of an older tree ({BASELINE})")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--calls", type=int, default=1500, help="sequential calls per tree per round (default 1500)")
    parser.add_argument("--burst", type=int, default=15000, help="calls at 32 in flight per tree per round")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.burst = 2, 50, 200
    return args


def extract(ref: str, into: Path) -> tuple[str, Path]:
    """``ref``'s ``src`` tree under ``into``, and its short hash."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return short, into / "src"


def run_ns(pid: int) -> int:
    """Nanoseconds process ``pid`` has run on a CPU, all its threads (``/proc/<pid>/schedstat``)."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
        return int(stat.read().split()[0])


def user_system(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def measure(peer: Peer, sequential: bool, count: int) -> dict[str, float]:
    """One block on ``peer``: CPU per call (µs), user and system per call (µs), and the median (µs) or calls/s."""
    ran, (user, system) = run_ns(peer.pid), user_system(peer.pid)
    if sequential:
        speed = statistics.median(peer.timed_call() for _ in range(count)) / 1000
    else:
        elapsed_ns, _ = peer.pipelined(count, 32)
        speed = count / (elapsed_ns / 1e9)
    user2, system2 = user_system(peer.pid)
    return {
        "cpu": (run_ns(peer.pid) - ran) / 1000 / count,
        "user": (user2 - user) * 1e6 / count,
        "system": (system2 - system) * 1e6 / count,
        "speed": speed,
    }


def main(argv: list[str]) -> int:
    """Measure, print the table and write it into docs/benchmarks.md."""
    args = parse(argv)
    refs = args.before or [BASELINE]
    with scratch_dir(args, "journaled_cpu") as tmp:
        trees: dict[str, Path | None] = {}
        for index, ref in enumerate(refs):
            short, src = extract(ref, tmp / f"tree{index}")
            trees[f"before: {short}"] = src
        trees[THIS] = None
        peers = {name: cs.start(cs.journaled(tmp / f"{i}.db", src=src)) for i, (name, src) in enumerate(trees.items())}
        results: dict[tuple[str, bool], list[dict[str, float]]] = {(n, s): [] for n in trees for s in (True, False)}
        try:
            for peer in peers.values():  # warm up: imports, the journal's pages, the allocator
                for _ in range(min(300, args.calls)):
                    peer.timed_call()
                peer.pipelined(min(2000, args.burst), 32)
            for _ in range(args.rounds):
                for sequential in (True, False):
                    order = list(trees)
                    random.shuffle(order)
                    for name in order:
                        count = args.calls if sequential else args.burst
                        results[(name, sequential)].append(measure(peers[name], sequential, count))
        finally:
            cs.close_all(peers)
        where = machine(tmp)
    body = report(results, list(trees), args)
    publish(
        args,
        "journaled_cpu",
        title="The journaled call's own CPU, tree against tree",
        argv=argv,
        where=where,
        body=body,
    )
    return 0


def report(results: dict[tuple[str, bool], list[dict[str, float]]], trees: list[str], args: argparse.Namespace) -> str:
    """The table: per tree and load, medians over the rounds, and this tree's CPU per call against each older one."""
    rows = []
    for sequential in (True, False):
        for name in trees:
            blocks = results[(name, sequential)]
            median = {key: statistics.median(block[key] for block in blocks) for key in blocks[0]}
            speed = f"{median['speed']:,.0f} µs median" if sequential else f"{median['speed']:,.0f} calls/s"
            load = "one at a time" if sequential else "32 in flight"
            cells = [f"{median[key]:,.0f}" for key in ("cpu", "user", "system")]
            rows.append([name, load, *cells, speed])
    header = ["tree", "load", "proxy CPU µs/call", "user µs", "system µs", "speed"]
    lines = [table(header, rows), ""]
    for older in trees[:-1]:
        for sequential in (True, False):
            paired = sorted(
                new["cpu"] - old["cpu"]
                for new, old in zip(results[(THIS, sequential)], results[(older, sequential)], strict=True)
            )
            load = "one at a time" if sequential else "32 in flight"
            lines.append(
                f"- {load}: this tree's CPU per call minus {older}'s, paired by round: median "
                f"{statistics.median(paired):+,.0f} µs (range {paired[0]:+,.0f} to {paired[-1]:+,.0f})."
            )
    lines.append(
        f"\n{args.rounds} rounds; {args.calls} calls one at a time and {args.burst} at 32 in flight per tree per "
        "round. CPU is the proxy process's own (all its threads), from /proc; no other process's is in it."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
