"""The physical floor of a journaled call: one durable SQLite commit on the same disk as the journal.

The same settings as the journal (WAL, ``synchronous=FULL``, autocommit off between ``BEGIN IMMEDIATE`` and
``COMMIT``) and a row of similar size, in a file next to the benchmark's journals.

Both loops first write enough (with ``synchronous=OFF``) for the WAL to pass its auto-checkpoint size and start
over: a commit that grows the WAL file costs about twice one that overwrites it (the file's size, metadata, must
be synced too), and a proxy that has served a few hundred calls is past that point.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

_ROW = '{"content":[{"type":"text","text":"ok"}],"isError":false}' * 2
PRIME_COMMITS = 1200  # > wal_autocheckpoint (1000 pages): the WAL has wrapped once


def _prime(con: sqlite3.Connection, step: Callable[[], int]) -> None:
    con.execute("PRAGMA synchronous=OFF")
    for _ in range(PRIME_COMMITS):
        step()
    con.execute("PRAGMA synchronous=FULL")


class CommitFloor:
    """An INSERT + COMMIT loop on a WAL, ``synchronous=FULL`` SQLite file."""

    def __init__(self, path: Path) -> None:
        self._con = sqlite3.connect(path, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        self._con.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        self._next = 1
        _prime(self._con, self.timed_commit)

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


class JournalStatements:
    """What one journaled call asks of SQLite, without the proxy around it: the same statements, same schema.

    ``BEGIN IMMEDIATE; SELECT; INSERT PENDING; COMMIT`` then ``BEGIN IMMEDIATE; UPDATE COMPLETED; COMMIT``, on a
    journal file whose schema the proxy's own code created (``contenders.make_journal``).
    """

    def __init__(self, path: Path) -> None:
        self._con = sqlite3.connect(path, isolation_level=None)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        self._workflow = str(path.resolve())
        self._next = 1
        _prime(self._con, self.timed_call)

    def timed_call(self) -> int:
        """Both transactions of one call, in nanoseconds."""
        seq, workflow, stamp = self._next, self._workflow, "2026-01-01T00:00:00.000Z"
        start = time.perf_counter_ns()
        self._con.execute("BEGIN IMMEDIATE")
        self._con.execute("SELECT * FROM calls WHERE workflow_id = ? AND seq = ?", (workflow, seq)).fetchone()
        self._con.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at)"
            " VALUES (?, ?, 'echo', ?, ?, 'PENDING', ?)",
            (workflow, seq, f'{{"n":{seq}}}', f"{seq:064x}", stamp),
        )
        self._con.execute("COMMIT")
        self._con.execute("BEGIN IMMEDIATE")
        self._con.execute(
            "UPDATE calls SET state = 'COMPLETED', outcome = ?, finished_at = ?"
            " WHERE workflow_id = ? AND seq = ? AND state = 'PENDING'",
            (_ROW, stamp, workflow, seq),
        )
        self._con.execute("COMMIT")
        elapsed = time.perf_counter_ns() - start
        self._next += 1
        return elapsed

    def close(self) -> None:
        """Close the connection."""
        self._con.close()
