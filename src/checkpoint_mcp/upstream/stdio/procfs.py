"""What Linux says of processes: who descends from whom and each one's state and group (``/proc``), and a pidfd
that tells the event loop when a child exits.

The keeper walks ``/proc`` to kill every descendant; the process group path reads it to tell a live member of a
group from a zombie. Where there is no ``/proc`` (macOS, BSD) callers do without it; where pidfds are not the
chosen path (``platforms.host``), a thread waits for the child instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

from checkpoint_mcp.platforms.host import HOST


def open_pidfd(pid: int | None) -> int | None:
    """A pidfd for ``pid`` that the loop can watch, where that is the chosen path and the kernel has them; else
    None."""
    if pid is None or not HOST.pidfd or sys.platform != "linux":
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def has_proc() -> bool:
    """Whether this system has Linux's ``/proc``."""
    return os.path.isdir("/proc/self")


def descendants(root: int) -> list[int]:
    """Every living descendant of ``root`` (from /proc; children files, else a scan of every process)."""
    found: list[int] = []
    frontier = [root]
    parents: dict[int, list[int]] | None = None
    while frontier:
        pid = frontier.pop()
        kids = children(pid)
        if kids is None:
            if parents is None:
                parents = _parents()
            kids = parents.get(pid, [])
        found.extend(kids)
        frontier.extend(kids)
    return found


def children(pid: int) -> list[int] | None:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    kids: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(word) for word in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue
            return None  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return kids


def process_stats() -> Iterator[tuple[int, list[bytes]]]:
    """Every process's pid and the fields of its ``/proc/PID/stat`` after the command name (state, ppid, pgrp, …)."""
    with os.scandir("/proc") as entries:  # closed even when the caller stops early
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            yield int(entry.name), stat[stat.rfind(b")") + 2 :].split()


def _parents() -> dict[int, list[int]]:
    by_parent: dict[int, list[int]] = {}
    for pid, fields in process_stats():
        by_parent.setdefault(int(fields[1]), []).append(pid)
    return by_parent
