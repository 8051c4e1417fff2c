"""Concurrent throughput: calls per second with 32 calls in flight (pipelined), for the same contenders.

The client keeps ``--in-flight`` requests outstanding on each contender: it sends that many, and for every answer
read sends one more (all answers of one read refilled with one write). Rounds are interleaved (a random order of
contenders each round); each round is ``--calls`` calls per contender. The journaled proxy can reach the
pass-through's rate only by sharing commits between concurrent calls (group commit).

Run: ``.venv/bin/python benchmarks/throughput.py [--quick] [--in-flight 32] [--no-fastmcp] [--candidate SRC]``.
"""

from __future__ import annotations

import argparse
import sys

import contenders as cs
from harness import Peer
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved, micros, percentile

TARGET_SHARE = 0.70


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--in-flight", type=int, default=32, help="requests outstanding at any time (default 32)")
    parser.add_argument("--calls", type=int, default=3000, help="calls per contender per round (default 3000)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="make each upstream tools/call take this long")
    cs.proxy_options(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.rounds = 64, 1
    return args


def measure(
    args: argparse.Namespace, chosen: list[cs.Contender]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per contender: calls/s of each round, and every call's latency in µs."""
    peers: dict[str, Peer] = {}
    rates: dict[str, list[float]] = {c.name: [0.0] * args.rounds for c in chosen}
    latencies: dict[str, list[float]] = {c.name: [] for c in chosen}
    try:
        for contender in chosen:
            peers[contender.name] = cs.start(contender)
        for peer in peers.values():
            peer.pipelined(max(args.in_flight * 4, args.calls // 10), args.in_flight)  # warm-up
        for round_no, name in interleaved(list(peers), args.rounds):
            elapsed_ns, each = peers[name].pipelined(args.calls, args.in_flight)
            rates[name][round_no] = args.calls / (elapsed_ns / 1e9)
            latencies[name].extend(micros(each))
    finally:
        cs.close_all(peers)
    return rates, latencies


def render(args: argparse.Namespace, rates: dict[str, list[float]], latencies: dict[str, list[float]]) -> str:
    """The table and the target."""
    throughput = {name: Summary.of(values) for name, values in rates.items()}
    passthrough = throughput["checkpoint"].median
    direct = throughput["direct"].median
    rows = []
    for name, s in throughput.items():
        each = Summary.of(latencies[name])
        rows.append(
            [
                name,
                fmt(s.median),
                fmt(s.minimum),
                fmt(s.maximum),
                f"{s.median / direct:.0%}",
                f"{s.median / passthrough:.0%}",
                fmt(each.median),
                fmt(each.p99),
            ]
        )
    header = [
        "Contender",
        "calls/s (median of rounds)",
        "slowest round",
        "fastest round",
        "of direct",
        "of pass-through",
        "call latency median µs",
        "p99 µs",
    ]
    share = throughput["journaled"].median / passthrough
    paired = percentile(sorted(j / p for j, p in zip(rates["journaled"], rates["checkpoint"], strict=True)), 0.5)
    body = [
        f"{args.in_flight} calls in flight, {args.rounds} interleaved rounds of {args.calls} calls per contender"
        + (f", upstream delay {args.delay_ms} ms per call" if args.delay_ms else "")
        + ".",
        "",
        table(header, rows),
        "",
        targets_table(
            [
                Target(
                    f"with {args.in_flight} in flight, journaled ≥ 70% of pass-through throughput",
                    f"{share:.0%} ({fmt(throughput['journaled'].median)} vs {fmt(passthrough)} calls/s; "
                    f"paired by round: {paired:.0%})",
                    share >= TARGET_SHARE,
                )
            ],
            issue=19,
        ),
    ]
    return "\n".join(body)


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "throughput") as tmp:
        chosen = cs.lineup(args, tmp, cs.Upstream(delay_ms=args.delay_ms))
        where = machine(tmp)
        rates, latencies = measure(args, chosen)
        title = f"Concurrent throughput ({args.in_flight} in flight)"
    publish(args, "throughput", title=title, argv=argv, where=where, body=render(args, rates, latencies))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
