"""A read's latency while journaled calls commit: a ping no longer waits for a commit it needs nothing from.

Two places, each with the current code and ``--before`` (another ``src/`` tree, e.g. ``git worktree add
/tmp/old-tree main`` then ``--before /tmp/old-tree/src``) side by side in one run, in interleaved blocks:

* **stdio proxy, SQLite**: each round writes 8 journaled ``echo`` calls and a ``ping`` in one go (an agent
  that fires a batch of calls, then asks something else), and times the ping's answer; the calls' answers are
  read after it. The upstream takes ``--delay-ms`` per call. Also a ping alone, for reference;
* **gateway, PostgreSQL** (one replica): ``--clients`` clients send journaled calls on one workflow without a
  pause while one more client pings the same workflow (same upstream, same interceptor, commits on the
  committer thread), and its pings are timed.

Run: ``.venv/bin/python benchmarks/reads_under_commits.py --before /tmp/old-tree/src [--quick] [--no-gateway]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import contenders as cs
import gateway as gw
from harness import Peer, echo_call
from report import common_arguments, machine, publish, scratch_dir, table
from stats import Summary, fmt, interleaved, micros

BURST = 8  # journaled calls written with each ping
PING = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n'


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--before", type=Path, required=True, help="the src/ tree to compare with")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--block", type=int, default=40, help="pings per contender per round (default 40)")
    parser.add_argument("--delay-ms", type=float, default=1.0, help="the stdio upstream's time per call")
    parser.add_argument("--clients", type=int, default=8, help="gateway: clients sending journaled calls")
    parser.add_argument("--no-gateway", action="store_true", help="leave the gateway (and PostgreSQL) out")
    parser.add_argument("--pg-url", default=None, help="gateway: this PostgreSQL database instead of a fresh one")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.block = 2, 5
    return args


# ---- the stdio proxy ----------------------------------------------------------------------------------------


def ping_behind_calls(peer: Peer, burst: int) -> int:
    """Write ``burst`` journaled calls and a ping at once; ns until the ping's answer (the calls' read after)."""
    idents = [peer.next_id() for _ in range(burst)]
    ping = peer.next_id()
    started = time.perf_counter_ns()
    peer.send(b"".join(echo_call(ident) for ident in idents) + PING % ping)
    waiting = set(idents)
    elapsed = 0
    while not elapsed:
        for line in peer.read_available():
            ident = json.loads(line).get("id")
            if ident == ping:
                elapsed = time.perf_counter_ns() - started
            waiting.discard(ident)
    while waiting:
        for line in peer.read_available():
            waiting.discard(json.loads(line).get("id"))
    return elapsed


def measure_stdio(args: argparse.Namespace, tmp: Path) -> dict[str, list[float]]:
    """Per row, the ping latencies in µs."""
    upstream = cs.Upstream(delay_ms=args.delay_ms)
    trees = {"after": None, "before": args.before}
    peers = {
        name: cs.start(cs.journaled(tmp / f"stdio-{name}.db", upstream, src=src, label=name))
        for name, src in trees.items()
    }
    rows = [(name, burst) for name in trees for burst in (BURST, 0)]
    samples: dict[str, list[float]] = {}
    try:
        for _ in range(3):
            for peer in peers.values():
                ping_behind_calls(peer, BURST)
        for _, (name, burst) in interleaved(rows, args.rounds):
            block = [ping_behind_calls(peers[name], burst) for _ in range(args.block)]
            samples.setdefault(_stdio_row(name, burst), []).extend(micros(block))
    finally:
        cs.close_all(peers)
    return samples


def _stdio_row(name: str, burst: int) -> str:
    return f"stdio, {name}: ping " + (f"behind {burst} journaled calls" if burst else "alone")


# ---- the gateway --------------------------------------------------------------------------------------------


async def pings_under_load(port: int, path: str, clients: int, count: int) -> list[int]:
    """``count`` pings of one client while ``clients`` others send journaled calls on the same workflow (ns)."""
    stop = False
    load = [gw.Client("127.0.0.1", port, path, True) for _ in range(clients)]
    for client in load:
        await client.start()

    async def run(client: gw.Client) -> None:
        while not stop:
            await client.call()

    tasks = [asyncio.ensure_future(run(client)) for client in load]
    pinger = gw.Connection("127.0.0.1", port)
    await pinger.open()
    headers = {"MCP-Protocol-Version": "2026-07-28"}
    samples: list[int] = []
    try:
        await asyncio.sleep(0.2)  # the load is under way
        for ident in range(count):
            body = {"jsonrpc": "2.0", "id": ident, "method": "ping", "params": {"_meta": gw.MODERN_META}}
            started = time.perf_counter_ns()
            status, got, data = await pinger.post(path, json.dumps(body).encode(), headers)
            samples.append(time.perf_counter_ns() - started)
            if status != 200 or "result" not in gw.answer_of(got, data):
                raise RuntimeError(f"ping failed ({status}): {data[:300]!r}")
    finally:
        stop = True
        await asyncio.gather(*tasks)
        pinger.close()
        for client in load:
            client.conn.close()
    return samples


def measure_gateway(args: argparse.Namespace) -> dict[str, list[float]]:
    """Per row, the ping latencies in µs."""
    samples: dict[str, list[float]] = {}
    with gw.postgres(args) as (url, url_before):
        served = {
            "after": gw.start_serve("after", 1, url),
            "before": gw.start_serve("before", 1, url_before, {"PYTHONPATH": str(args.before.resolve())}),
        }
        try:
            for name in served:
                gw.run_loop(pings_under_load(*served[name].endpoints[0], args.clients, 20))
            for _, name in interleaved(list(served), args.rounds):
                port, path = served[name].endpoints[0]
                block = gw.run_loop(pings_under_load(port, path, args.clients, args.block))
                samples.setdefault(f"gateway PostgreSQL, {name}: ping under load", []).extend(micros(block))
        finally:
            for one in served.values():
                one.stop()
    return samples


def render(args: argparse.Namespace, samples: dict[str, list[float]]) -> str:
    """The table and what it says."""
    header = ["Read", "median µs", "p90 µs", "p99 µs", "mean µs", "n"]
    rows = []
    for name, values in samples.items():
        s = Summary.of(values)
        rows.append([name, fmt(s.median, 1), fmt(s.p90, 1), fmt(s.p99, 1), fmt(s.mean, 1), str(s.count)])
    medians = {name: Summary.of(values).median for name, values in samples.items()}
    lines = [
        f"{args.rounds} interleaved rounds of {args.block} pings per row. stdio: the upstream takes "
        f"{args.delay_ms:g} ms per call; each ping is written with {BURST} journaled calls before it. Gateway: "
        f"{args.clients} clients send journaled calls on the ping's workflow throughout.",
        "",
        table(header, rows),
        "",
    ]
    before, after = medians.get(_stdio_row("before", BURST)), medians.get(_stdio_row("after", BURST))
    if before and after:
        lines.append(
            f"stdio: a ping behind journaled calls, median {fmt(after, 1)} µs against {fmt(before, 1)} before."
        )
    gate = "gateway PostgreSQL, {}: ping under load"
    if gate.format("before") in medians:
        lines.append(
            f"Gateway: a ping under load, median {fmt(medians[gate.format('after')], 1)} µs against "
            f"{fmt(medians[gate.format('before')], 1)} before."
        )
    lines += ["", WHAT_PASSES]
    return "\n".join(lines)


WHAT_PASSES = """\
**What may pass a commit, and why that is safe** (`intercept/interceptor.py`, `_release_up` and `_emit_down`).
A journaled call waits for its PENDING row and its answer for its COMPLETED row, and the lines behind them wait
with them. Two kinds of line no longer do: a client *request* that is not journaled (`ping`, `tools/list`,
`resources/read`, a tool that is read-only or `journal = false`) goes upstream at once, and the upstream's
*answer* to such a request goes to the client at once. Neither needs anything from the commit, and JSON-RPC
gives no order to requests in flight together (a server may run them concurrently; a client that needs one
answered first waits for that answer before it sends the next), nor to their responses. What keeps its place,
and is never passed while it is held: every notification (a `notifications/cancelled` still follows its call,
`initialized` its `initialize`, progress precedes the answer it belongs to, a `list_changed` what follows it),
every response of the client (to sampling, elicitation, roots), every server request, journaled calls among
themselves, a policy's probes, and the calls it settles. The stdio proxy now hands a SQLite commit that would
wait for another writer's lock to a committer thread, as the gateway does, so its loop keeps relaying meanwhile
(on PostgreSQL its commits stay on its own connection, which holds the workflow's ownership).

Why the stdio proxy gains little here: with the lock free, its SQLite commit still runs on its loop (cheaper
there than on a thread, see above), so the ping goes upstream before the commit starts but its answer is read
once the commit ends; only the upstream's round trip now overlaps the fsync. The gateway commits on its
committer thread, and a ping of a busy workflow no longer queues behind a commit there. Where a stdio commit
waits for another writer, the ping goes through meanwhile (`tests/proxy/test_reads_pass_commits.py`)."""


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "reads") as tmp:
        where = machine(tmp)
        samples = measure_stdio(args, tmp)
        if not args.no_gateway:
            samples.update(measure_gateway(args))
    publish(
        args,
        "reads_under_commits",
        title="A read while journaled calls commit",
        argv=argv,
        where=where,
        body=render(args, samples),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
