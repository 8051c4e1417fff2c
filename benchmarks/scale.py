"""Scale: per-call overhead of a journaled proxy whose journal already holds 1,000,000 rows, versus an empty one.

The big journal is made by the journal's own code (``SqliteJournal``, run from the proxy's tree, creates the
schema) and then filled with one
bulk ``executemany`` into the same table, as COMPLETED calls of the very workflow the proxy will use, so the
proxy's cursor starts after them and every lookup and insert goes through the full index. Then, interleaved:
direct, journaled on the empty journal, journaled on the big one; and the start-up time of both proxies.

Run: ``.venv/bin/python benchmarks/scale.py [--quick] [--rows N] [--calls N]``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import contenders as cs
from harness import Peer
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from startup import time_to_initialize
from stats import Summary, fmt, interleaved, micros

TARGET_RATIO = 1.10
OUTCOME = '{"_meta":{"checkpoint/journal":{"workflow":"%s","seq":%d,"replayed":false}},"content":[{"type":"text","text":"ok"}],"isError":false}'  # noqa: E501


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the big journal (default 1,000,000)")
    parser.add_argument("--calls", type=int, default=3000, help="measured calls per contender (default 3000)")
    parser.add_argument("--block", type=int, default=100, help="calls per contender per interleaved block")
    parser.add_argument("--starts", type=int, default=10, help="launches per proxy for the start-up time")
    cs.src_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.calls, args.block, args.starts = 2000, 20, 10, 1
    return args


def _rows(workflow: str, count: int) -> Iterator[tuple[object, ...]]:
    stamp = "2026-01-01T00:00:00.000Z"
    for seq in range(1, count + 1):
        outcome = OUTCOME % (workflow, seq)
        yield (workflow, seq, "echo", f'{{"n":{seq}}}', f"{seq:064x}", "COMPLETED", outcome, stamp, stamp)


def prefill(path: Path, count: int, src: Path | None) -> float:
    """Make the journal at ``path`` holding ``count`` completed calls of its default workflow; seconds taken."""
    start = time.perf_counter()
    cs.make_journal(path, src)  # the schema, exactly as the proxy makes it
    workflow = str(path.resolve())  # the default workflow id: the journal's absolute path
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA synchronous=OFF")
        con.execute("BEGIN")
        con.executemany(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _rows(workflow, count),
        )
        con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return time.perf_counter() - start


def measure(args: argparse.Namespace, tmp: Path) -> tuple[dict[str, list[float]], dict[str, list[float]], float]:
    """(call µs per contender, start-up ms per proxy, seconds the pre-fill took)."""
    big, empty = tmp / "big.db", tmp / "empty.db"
    fill_seconds = prefill(big, args.rows, args.src)
    label = f"journaled, {args.rows:,} rows"
    chosen = [
        cs.direct(),
        cs.journaled(empty, src=args.src, label="journaled, empty"),
        cs.journaled(big, src=args.src, label=label),
    ]
    starts: dict[str, list[float]] = {c.name: [] for c in chosen[1:]}
    for _, contender in interleaved(chosen[1:], args.starts):
        starts[contender.name].append(time_to_initialize(contender) / 1e6)
    peers: dict[str, Peer] = {}
    samples: dict[str, list[int]] = {c.name: [] for c in chosen}
    try:
        for contender in chosen:
            peers[contender.name] = cs.start(contender)
        for peer in peers.values():
            for _ in range(min(200, args.calls)):
                peer.timed_call()
        for _, name in interleaved(list(peers), max(1, args.calls // args.block)):
            samples[name].extend(peers[name].timed_call() for _ in range(args.block))
    finally:
        cs.close_all(peers)
    return {name: micros(values) for name, values in samples.items()}, starts, fill_seconds


def render(
    args: argparse.Namespace, results: dict[str, list[float]], starts: dict[str, list[float]], fill_s: float, size: int
) -> str:
    """The tables and the target."""
    calls = {name: Summary.of(values) for name, values in results.items()}
    base = calls["direct"].median
    header = ["Contender", "median µs", "p90 µs", "p99 µs", "added vs direct (median)", "start-up ms (median)"]
    rows = []
    for name, s in calls.items():
        added = "" if name == "direct" else f"+{fmt(s.median - base, 1)}"
        start = fmt(Summary.of(starts[name]).median, 1) if name in starts else ""
        rows.append([name, fmt(s.median, 1), fmt(s.p90, 1), fmt(s.p99, 1), added, start])
    empty, big = (calls[name].median - base for name in list(calls)[1:])
    ratio = big / empty
    return "\n".join(
        [
            f"The big journal: {args.rows:,} rows, {size / 2**20:,.0f} MiB, filled in {fill_s:.1f} s. "
            f"{args.calls:,} sequential calls per contender in interleaved blocks of {args.block}; "
            f"{args.starts} launches per proxy for the start-up time.",
            "",
            table(header, rows),
            "",
            targets_table(
                [
                    Target(
                        f"a {args.rows:,}-row journal costs ≤ 10% more per call than an empty one",
                        f"{ratio:.2f}x the empty journal's added time (+{fmt(big, 1)} vs +{fmt(empty, 1)} µs)",
                        ratio <= TARGET_RATIO,
                    )
                ]
            ),
        ]
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "scale") as tmp:
        where = machine(tmp)
        results, starts, fill_seconds = measure(args, tmp)
        size = os.path.getsize(tmp / "big.db")
        body = render(args, results, starts, fill_seconds, size)
    publish(args, "scale", title="Scale: a journal of 1,000,000 rows", argv=argv, where=where, body=body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
