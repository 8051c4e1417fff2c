"""The cheapest possible stdio proxy: copies bytes both ways and does nothing else (a floor, not a contender).

It runs the upstream as a child over pipes and, in one ``select`` loop, copies whatever one side sends to the
other with ``os.read``/``os.write``: no parsing, no line splitting, no asyncio. Whatever a real proxy adds over
direct calls beyond what this adds is the proxy's own work; what this adds is the price of one more process
between client and server (two more pipe hops and wake-ups per call).

Run: ``python benchmarks/null_relay.py <upstream argv...>``.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys

READ_SIZE = 1 << 16


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def relay(argv: list[str]) -> int:
    """Copy stdin -> child stdin and child stdout -> stdout until either side closes."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None
    assert child.stdout is not None
    to_child, from_child = child.stdin.fileno(), child.stdout.fileno()
    routes = {0: to_child, from_child: 1}
    while routes:
        ready, _, _ = select.select(list(routes), [], [])
        for fd in ready:
            data = os.read(fd, READ_SIZE)
            if not data:
                target = routes.pop(fd)
                if target == to_child:
                    child.stdin.close()
                    continue
                routes.clear()
                break
            _write_all(routes[fd], data)
    return child.wait()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: null_relay.py COMMAND [ARGS...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(relay(sys.argv[1:]))
