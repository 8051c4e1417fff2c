"""Replay latency: a completed call answered from the journal (``params._meta.checkpoint_seq``), upstream untouched.

One journaled proxy first completes ``--journaled`` calls at sequences 1..N; then each measured call re-sends the
call at one of those sequences (same tool, same arguments), which the proxy answers from the journal. In the same
interleaved run: direct to the upstream, the pass-through proxy, and a fresh journaled call on another proxy.

Run: ``.venv/bin/python benchmarks/replay.py [--quick] [--calls N]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import contenders as cs
from harness import Peer, PeerError, RequestMaker, seq_call
from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved, micros

REPLAY = "journaled, replayed"
TARGET_US = 200.0


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, default=4000, help="measured calls per contender (default 4000)")
    parser.add_argument("--block", type=int, default=100, help="calls per contender per interleaved block")
    parser.add_argument("--journaled", type=int, default=1000, help="completed calls to replay from (default 1000)")
    cs.src_option(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.block, args.journaled = 20, 10, 10
    return args


def pinned(seq: int) -> RequestMaker:
    """Requests for the call at sequence ``seq`` (argument n = seq), whatever their id."""
    return lambda ident: seq_call(ident, seq, seq)


def fill(peer: Peer, count: int) -> None:
    """Complete the calls at sequences 1..count."""
    for seq in range(1, count + 1):
        peer.timed_call(pinned(seq))


def replays(peer: Peer, count: int) -> Iterator[int]:
    """Timed replays cycling over sequences 1..count; the first is checked to be a replay indeed."""
    first = True
    for seq in itertools.cycle(range(1, count + 1)):
        elapsed = peer.timed_call(pinned(seq))
        if first:
            first = False
            _check_replayed(peer, seq)
        yield elapsed


def _check_replayed(peer: Peer, seq: int) -> None:
    ident = peer.next_id()
    peer.send(seq_call(ident, seq, seq))
    result = peer.response(ident).get("result", {})
    info = result.get("_meta", {}).get("checkpoint/journal", {})
    if not info.get("replayed"):
        raise PeerError(f"sequence {seq} was not replayed: {json.dumps(result)[:300]}")


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    """Interleaved blocks; microseconds per contender."""
    chosen = [cs.direct(), cs.passthrough(src=args.src), cs.journaled(tmp / "fresh.db", src=args.src)]
    replayer = cs.journaled(tmp / "replayed.db", src=args.src, label=REPLAY)
    peers: dict[str, Peer] = {}
    samples: dict[str, list[int]] = {c.name: [] for c in [*chosen, replayer]}
    try:
        for contender in [*chosen, replayer]:
            peers[contender.name] = cs.start(contender)
        fill(peers[REPLAY], args.journaled)
        replay_stream = replays(peers[REPLAY], args.journaled)
        warmup = min(200, args.calls)
        list(itertools.islice(replay_stream, warmup))
        for name in samples.keys() - {REPLAY}:
            for _ in range(warmup):
                peers[name].timed_call()
        for _, name in interleaved(list(samples), max(1, args.calls // args.block)):
            if name == REPLAY:
                samples[name].extend(itertools.islice(replay_stream, args.block))
            else:
                peer = peers[name]
                samples[name].extend(peer.timed_call() for _ in range(args.block))
    finally:
        cs.close_all(peers)
    return {name: micros(values) for name, values in samples.items()}


def render(args: argparse.Namespace, results: dict[str, list[float]]) -> str:
    """The table and the target."""
    summaries = {name: Summary.of(values) for name, values in results.items()}
    base = summaries["direct"].median
    rows = [
        [name, fmt(s.median, 1), fmt(s.p90, 1), fmt(s.p99, 1), f"{s.median / base:.2f}x", str(s.count)]
        for name, s in summaries.items()
    ]
    replay = summaries[REPLAY].median
    return "\n".join(
        [
            f"{args.calls:,} calls per contender in interleaved blocks of {args.block}; replays cycle over "
            f"{args.journaled:,} completed sequences.",
            "",
            table(["Contender", "median µs", "p90 µs", "p99 µs", "vs direct", "n"], rows),
            "",
            targets_table([Target("replay ≤ 0.2 ms (median)", f"{fmt(replay, 1)} µs", replay <= TARGET_US)]),
        ]
    )


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "replay") as tmp:
        where = machine(tmp)
        results = measure(args, tmp)
    publish(args, "replay", title="Replay latency", argv=argv, where=where, body=render(args, results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
