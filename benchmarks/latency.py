"""Sequential ``tools/call`` latency: direct, through ``checkpoint``, journaled, through FastMCP; and the floor.

All contenders run at once and are measured in interleaved blocks (a random order each round), next to an
INSERT + COMMIT loop on a WAL, ``synchronous=FULL`` SQLite file in the same temporary directory as the journal:
a journaled call needs two such commits, so "two commits + overhead" is on the table.

Run: ``.venv/bin/python benchmarks/latency.py [--quick] [--calls N] [--result-bytes N] [--no-fastmcp]
[--candidate SRC_DIR]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import contenders as cs
from floor import CommitFloor, JournalStatements
from harness import Peer
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved, micros, paired_difference

FLOOR = "sqlite commit"
STATEMENTS = "journal SQL alone (2 tx)"
PASS_LIMIT_US = 150.0


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, default=4000, help="measured calls per contender (default 4000)")
    parser.add_argument("--block", type=int, default=100, help="calls per contender per interleaved block")
    parser.add_argument("--warmup", type=int, default=300, help="unmeasured calls per contender first")
    parser.add_argument("--result-bytes", type=int, default=0, help="size of each tool result's text (default tiny)")
    cs.proxy_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.block, args.warmup = 20, 10, 3
    return args


def measure(args: argparse.Namespace, chosen: list[cs.Contender], tmp: Path) -> dict[str, list[list[float]]]:
    """Interleaved blocks of sequential calls (and commits): per contender, each round's block in microseconds."""
    peers: dict[str, Peer] = {}
    floor = CommitFloor(tmp / "floor.db")
    cs.make_journal(tmp / "statements.db", args.src)
    statements = JournalStatements(tmp / "statements.db")
    rounds = max(1, args.calls // args.block)
    names = [*(c.name for c in chosen), FLOOR, STATEMENTS]
    samples: dict[str, list[list[float]]] = {name: [[] for _ in range(rounds)] for name in names}
    try:
        for contender in chosen:
            peers[contender.name] = cs.start(contender)
        for _ in range(args.warmup):
            for peer in peers.values():
                peer.timed_call()
            floor.timed_commit()
            statements.timed_call()
        for round_no, name in interleaved(names, rounds):
            if name == FLOOR:
                block = [floor.timed_commit() for _ in range(args.block)]
            elif name == STATEMENTS:
                block = [statements.timed_call() for _ in range(args.block)]
            else:
                peer = peers[name]
                block = [peer.timed_call() for _ in range(args.block)]
            samples[name][round_no] = micros(block)
    finally:
        floor.close()
        statements.close()
        cs.close_all(peers)
    return samples


def render(args: argparse.Namespace, blocks: dict[str, list[list[float]]], fastmcp_version: str | None) -> str:
    """The tables and the targets."""
    summaries = {name: Summary.of(value for block in rounds for value in block) for name, rounds in blocks.items()}
    base = summaries["direct"].median
    commit = summaries[FLOOR].median
    rows = []
    for name, s in summaries.items():
        added = paired = ""
        if name not in ("direct", FLOOR, STATEMENTS):
            added = f"+{fmt(s.median - base, 1)}"
            paired = f"+{fmt(paired_difference(blocks[name], blocks['direct']), 1)}"
        ratio = "" if name in (FLOOR, STATEMENTS) else f"{s.median / base:.2f}x"
        cells = [fmt(s.median, 1), fmt(s.p90, 1), fmt(s.p99, 1), fmt(s.mean, 1), added, paired, ratio, str(s.count)]
        rows.append([name, *cells])
    header = [
        "Contender",
        "median µs",
        "p90 µs",
        "p99 µs",
        "mean µs",
        "added vs direct (median)",
        "added, paired by round",
        "vs direct",
        "n",
    ]
    size = f"{args.result_bytes:,}-byte" if args.result_bytes else "tiny"
    body = [
        f"{args.calls:,} sequential calls per contender ({size} results) in interleaved blocks of {args.block}, "
        f"after {args.warmup} warm-up calls each. *Added, paired by round*: the median over rounds of (block median "
        "minus direct's block median in the same round), a cross-check that is robust to the machine's slow drifts.",
        "",
        table(header, rows),
        "",
    ]
    passthrough_added = summaries["checkpoint"].median - base
    journal_added = summaries["journaled"].median - base
    limit = 2 * commit + PASS_LIMIT_US
    if cs.NULL_RELAY_NAME in summaries:
        hop = summaries[cs.NULL_RELAY_NAME].median - base
        body.append(
            f"A relay that only copies bytes adds {fmt(hop, 1)} µs (one more process in the path): the pass-through "
            f"spends {fmt(passthrough_added - hop, 1)} µs per call above that on its own work."
        )
    sql = summaries[STATEMENTS].median
    body.append(
        f"Floor: one durable commit = {fmt(commit, 1)} µs median, so two = {fmt(2 * commit, 1)} µs. "
        f"The journaled proxy adds {fmt(journal_added, 1)} µs over direct, "
        f"i.e. {fmt(journal_added - 2 * commit, 1)} µs above the two commits. Of that: the journal's own "
        f"statements (same SQL and schema, no proxy) take {fmt(sql, 1)} µs ({sql - 2 * commit:+,.1f} µs over "
        f"two bare commits); the pass-through work is {fmt(passthrough_added, 1)} µs; the rest, "
        f"{fmt(journal_added - sql - passthrough_added, 1)} µs, is the proxy's journaling CPU (parse, signature, "
        "result splice, statement wrappers)."
    )
    limit19 = 2 * commit + 100.0
    targets = [
        Target(
            "pass-through adds ≤ 0.15 ms per call (median)",
            f"+{fmt(passthrough_added, 1)} µs",
            passthrough_added <= PASS_LIMIT_US,
        ),
        Target(
            "journaled adds ≤ 2 commits + 0.15 ms (median)",
            f"+{fmt(journal_added, 1)} µs vs limit {fmt(limit, 1)} µs",
            journal_added <= limit,
        ),
    ]
    targets19 = [
        Target(
            "journaled adds ≤ 2 durable commits + 0.10 ms (median)",
            f"+{fmt(journal_added, 1)} µs vs limit {fmt(limit19, 1)} µs",
            journal_added <= limit19,
        )
    ]
    if "fastmcp" in summaries:
        share = summaries["journaled"].median / summaries["fastmcp"].median
        targets.append(Target("journaled median ≤ ½ FastMCP proxy median", f"{share:.2f}x FastMCP", share <= 0.5))
        body.append(f"\nFastMCP {fastmcp_version} (`create_proxy` on a stdio transport, served on stdio).")
    limit30 = 2 * commit + 300.0
    targets30 = [
        Target(
            "journaled adds ≤ 2 × the commit floor + 0.30 ms (median)",
            f"+{fmt(journal_added, 1)} µs vs limit {fmt(limit30, 1)} µs",
            journal_added <= limit30,
        )
    ]
    body += ["", targets_table(targets), "", targets_table(targets19, issue=19), "", targets_table(targets30, issue=30)]
    return "\n".join(body)


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "latency") as tmp:
        chosen = cs.lineup(args, tmp, cs.Upstream(result_bytes=args.result_bytes))
        where = machine(tmp)
        results = measure(args, chosen, tmp)
        python = None if args.no_fastmcp else cs.fastmcp_python(create=False)
        version = cs.fastmcp_version(python) if python is not None else None
    publish(
        args,
        "latency",
        title="Sequential tools/call latency",
        argv=argv,
        where=where,
        body=render(args, results, version),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
