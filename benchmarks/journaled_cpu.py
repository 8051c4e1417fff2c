"""A call's own CPU in the stdio proxy, this tree against older ones, in one run (issue 30): the proxy's CPU per call
(``/proc/<pid>/schedstat`` run time, and ``/proc/<pid>/stat``'s user and system split), its median latency alone,
and its calls/s with 32 in flight.

``--path`` picks the call measured, each published in its own section:

* ``journaled`` (the default; section ``journaled_cpu``): a fresh call, journaled; every tree's proxy journals to
  its own SQLite file in the same directory;
* ``pass-through`` (``journaled_cpu_pass_through``): the proxy without ``--journal``;
* ``replay`` (``journaled_cpu_replay``): a completed call answered from the journal, the upstream untouched. Each
  tree's proxy first completes ``--completed`` calls at sequences 1..N (``replay.py``'s ``fill``), then every
  measured call re-sends one of them (``params._meta.checkpoint_seq``), cycling over the N sequences. The 32 in
  flight are kept: they are 32 different completed sequences at a time (so ``--completed`` is at least 32), as a
  client resuming a batch of calls would send them.

All trees are measured in interleaved rounds (a fresh random order each round), so a noisy moment of the shared
machine hits them alike. The older trees come from this checkout's git history (``git archive REV src``).

Run: ``.venv/bin/python benchmarks/journaled_cpu.py [--path PATH] [--before REV ...] [--rounds N] [--calls N]
[--quick]`` (default: the tree before issue 30's first change, 76f931e).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import contenders as cs
from harness import Peer, RequestMaker, echo_call
from replay import fill, pinned, replays
from report import common_arguments, machine, publish, scratch_dir, table

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "76f931e"  # main before issue 30's first change (the merge 8b4dcf9's first parent)
THIS = "this tree"
IN_FLIGHT = 32
# --path -> (doc section, title)
PATHS = {
    "journaled": ("journaled_cpu", "The journaled call's own CPU, tree against tree"),
    "pass-through": ("journaled_cpu_pass_through", "The pass-through call's own CPU, tree against tree"),
    "replay": ("journaled_cpu_replay", "The replayed call's own CPU, tree against tree"),
}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--path", choices=list(PATHS), default="journaled", help="the call measured (journaled)")
    parser.add_argument("--before", action="append", default=None, help=f"git ref of an older tree ({BASELINE})")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--calls", type=int, default=1500, help="sequential calls per tree per round (default 1500)")
    parser.add_argument("--burst", type=int, default=15000, help="calls at 32 in flight per tree per round")
    parser.add_argument(
        "--completed", type=int, default=1000, help="replay: completed calls each proxy replays from (default 1000)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.calls, args.burst, args.completed = 2, 50, 200, 50
    if args.path == "replay" and args.completed < IN_FLIGHT:
        parser.error(f"--completed must be at least {IN_FLIGHT}: the calls in flight replay different sequences")
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


@dataclass(frozen=True)
class Driver:
    """How one tree's proxy is called: one timed call (ns), and the requests of a pipelined block."""

    peer: Peer
    call: Callable[[], int]
    make: RequestMaker = echo_call


def contender(path: str, journal: Path, src: Path | None, name: str) -> cs.Contender:
    """The proxy of one tree for ``path``: with a journal at ``journal``, or none for pass-through."""
    if path == "pass-through":
        return cs.passthrough(src=src, label=name)
    return cs.journaled(journal, src=src, label=name)


def driver(path: str, peer: Peer, completed: int) -> Driver:
    """``peer``'s calls for ``path``; for replay, first completes the calls at sequences 1..``completed``."""
    if path != "replay":
        return Driver(peer, peer.timed_call)
    fill(peer, completed)
    stream = replays(peer, completed)  # checks its first call is answered from the journal
    sequences = itertools.cycle(range(1, completed + 1))

    def make(ident: int) -> bytes:  # the next sequence's call, for the pipelined blocks
        return pinned(next(sequences))(ident)

    return Driver(peer, lambda: next(stream), make)


def measure(drive: Driver, sequential: bool, count: int) -> dict[str, float]:
    """One block: CPU per call (µs), user and system per call (µs), and the median (µs) or calls/s."""
    peer = drive.peer
    ran, (user, system) = run_ns(peer.pid), user_system(peer.pid)
    if sequential:
        speed = statistics.median(drive.call() for _ in range(count)) / 1000
    else:
        elapsed_ns, _ = peer.pipelined(count, IN_FLIGHT, drive.make)
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
    name, title = PATHS[args.path]
    with scratch_dir(args, name) as tmp:
        trees: dict[str, Path | None] = {}
        for index, ref in enumerate(refs):
            short, src = extract(ref, tmp / f"tree{index}")
            trees[f"before: {short}"] = src
        trees[THIS] = None
        peers: dict[str, Peer] = {}
        results: dict[tuple[str, bool], list[dict[str, float]]] = {(n, s): [] for n in trees for s in (True, False)}
        try:
            for index, (tree, src) in enumerate(trees.items()):
                peers[tree] = cs.start(contender(args.path, tmp / f"{index}.db", src, tree))
            drivers = {tree: driver(args.path, peer, args.completed) for tree, peer in peers.items()}
            for drive in drivers.values():  # warm up: imports, the journal's pages, the allocator
                for _ in range(min(300, args.calls)):
                    drive.call()
                drive.peer.pipelined(min(2000, args.burst), IN_FLIGHT, drive.make)
            for _ in range(args.rounds):
                for sequential in (True, False):
                    order = list(trees)
                    random.shuffle(order)
                    for tree in order:
                        count = args.calls if sequential else args.burst
                        results[(tree, sequential)].append(measure(drivers[tree], sequential, count))
        finally:
            cs.close_all(peers)
        where = machine(tmp)
    body = report(results, list(trees), args)
    publish(args, name, title=title, argv=argv, where=where, body=body, script="journaled_cpu")
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
    what = {
        "journaled": "Each call is a fresh one, journaled to the tree's own SQLite file.",
        "pass-through": "The proxy runs without a journal: each call is relayed to the upstream and back.",
        "replay": f"Each call re-sends a completed one (its sequence pinned), answered from the journal: the calls "
        f"cycle over {args.completed:,} completed sequences per tree, made before the rounds.",
    }[args.path]
    lines.append(
        f"\n{args.rounds} rounds; {args.calls} calls one at a time and {args.burst} at {IN_FLIGHT} in flight per tree "
        f"per round. {what} CPU is the proxy process's own (all its threads), from /proc; no other process's is in it."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
