"""The physical floor of a journaled call: one durable SQLite commit on the same disk as the journal.

The same settings as the journal (WAL, ``synchronous=FULL``, autocommit off between ``BEGIN IMMEDIATE`` and
``COMMIT``) and a row of similar size, in a file next to the benchmark's journals.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

_ROW = '{"content":[{"type":"text","text":"ok"}],"isError":false}' * 2


class CommitFloor:
    """An INSERT + COMMIT loop on a WAL, ``synchronous=FULL`` SQLite file."""

    def __init__(self, path: Path) -> None:
        self._con = sqlite3.connect(path, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        self._con.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        self._next = 1

    def timed_commit(self) -> int:
        """One durable INSERT + COMMIT, in nanoseconds."""
        start = time.perf_counter_ns()
        self._con.execute("BEGIN IMMEDIATE")
        self._con.execute("INSERT INTO t (k, v) VALUES (?, ?)", (self._next, _ROW))
        self._con.execute("COMMIT")
        elapsed = time.perf_counter_ns() - start
        self._next += 1
        return elapsed

    def close(self) -> None:
        """Close the connection."""
        self._con.close()
