"""Run every benchmark, one after the other, each writing its section of ``docs/benchmarks.md``.

Run: ``.venv/bin/python benchmarks/run_all.py [--quick] [--no-fastmcp] [--src DIR]``; other options are the
scripts' own (run one script directly to pass them).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ORDER = [
    "latency",
    "throughput",
    "replay",
    "scale",
    "startup",
    "session",
    "session_journal",
    "backends",
    "remote",
    "repeat_lookup",
    "limit_lookup",
    "audit",
]
TAKES_FASTMCP = {"latency", "throughput", "startup"}


def main(argv: list[str]) -> int:
    """Run the scripts in ``ORDER``; stop at the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run, not a measurement")
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    parser.add_argument("--src", type=Path, default=None, help="run checkpoint from this src/ tree")
    parser.add_argument("--only", nargs="*", choices=ORDER, default=ORDER, help="run only these")
    args = parser.parse_args(argv)
    for name in [n for n in ORDER if n in args.only]:
        command = [sys.executable, str(BENCH_DIR / f"{name}.py")]
        if args.quick:
            command.append("--quick")
        if args.no_fastmcp and name in TAKES_FASTMCP:
            command.append("--no-fastmcp")
        if args.src is not None:
            command += ["--src", str(args.src)]
        start = time.monotonic()
        print(f"== {name}", file=sys.stderr, flush=True)
        done = subprocess.run(command, check=False)
        print(f"== {name}: exit {done.returncode} after {time.monotonic() - start:.0f}s", file=sys.stderr)
        if done.returncode != 0:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
