"""System calls per tools/call made by the proxy process, counted with ``strace -c``.

Each proxy runs twice under ``strace -c`` (the proxy process only, not its upstream): once for the handshake and
``--calls`` sequential calls, once for the handshake alone; the difference divided by ``--calls`` is what one
call costs in system calls. On a virtual machine every system call is expensive, and a journaled call makes
several times more than a relayed one (SQLite's locks, WAL writes and fsyncs).

Run: ``.venv/bin/python benchmarks/syscalls.py [--calls N] [--src DIR]`` (needs ``strace``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import contenders as cs
from harness import Peer
from report import table


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls to count (default 2000)")
    parser.add_argument("--pipelined", action="store_true", help="32 calls in flight instead of sequential")
    cs.src_option(parser)
    return parser.parse_args(argv)


def counted(contender: cs.Contender, calls: int, pipelined: bool, out: Path) -> Counter[str]:
    """System call counts of the proxy process serving the handshake and ``calls`` calls."""
    peer = Peer(["strace", "-c", "-o", str(out), *contender.argv], env=contender.environment())
    peer.initialize()
    if pipelined and calls:
        peer.pipelined(calls, 32)
    else:
        for _ in range(calls):
            peer.timed_call()
    peer.close()
    counts: Counter[str] = Counter()
    for row in out.read_text(encoding="utf-8").splitlines():
        fields = row.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] = int(fields[3])
    return counts


def main(argv: list[str]) -> int:
    """Count and print."""
    args = parse(argv)
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed")
    per_call: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-syscalls-") as tmp_name:
        tmp = Path(tmp_name)
        for contender in (cs.passthrough(src=args.src), cs.journaled(tmp / "journal.db", src=args.src)):
            full = counted(contender, args.calls, args.pipelined, tmp / "full.txt")
            base = counted(contender, 0, args.pipelined, tmp / "base.txt")
            per_call[contender.name] = {name: (full[name] - base[name]) / args.calls for name in full}
    names = sorted({n for counts in per_call.values() for n, v in counts.items() if v >= 0.05})
    names.sort(key=lambda n: -per_call["journaled"].get(n, 0.0))
    rows = [[f"`{name}`", *(f"{per_call[c].get(name, 0.0):.2f}" for c in per_call)] for name in names]
    rows.append(["**total**", *(f"{sum(v for v in per_call[c].values() if v > 0):.1f}" for c in per_call)])
    mode = "32 in flight" if args.pipelined else "sequential"
    print(f"System calls per tools/call of the proxy process ({args.calls:,} calls, {mode}):\n")
    print(table(["system call", *per_call], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
