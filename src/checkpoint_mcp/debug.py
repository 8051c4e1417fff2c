"""Named debug triggers: crash tests kill the process at exact points, so they are deterministic.

Set ``CHECKPOINT_DEBUG_TRIGGER`` to a comma-separated list of points, each optionally ``@N`` to fire on the
N-th time the point is reached (default: the first). When a point fires, the process kills itself outright
(SIGKILL; TerminateProcess on Windows): no ``finally`` block, no atexit handler, no flush runs, exactly as if the
machine had lost power at that line.
Unset (the normal case), ``trigger`` is a set lookup.
"""

from __future__ import annotations

import os

from checkpoint_mcp.platforms.signals import die_now

ENV_VAR = "CHECKPOINT_DEBUG_TRIGGER"


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, nth = item.partition("@")
        armed[name] = int(nth) if nth else 1
    return armed


_armed: dict[str, int] = _parse(os.environ.get(ENV_VAR, ""))


def trigger(point: str) -> None:
    """SIGKILL this process if ``point`` is armed and this is the armed hit; otherwise do nothing."""
    if point not in _armed:
        return
    _armed[point] -= 1
    if _armed[point] <= 0:
        die_now()
