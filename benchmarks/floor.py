"""The physical floor of a journaled call: one durable commit on the same disk as the journal (SQLite or PostgreSQL).

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
from typing import Any

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


# ---- PostgreSQL --------------------------------------------------------------------------------------------
# The journal's connection: psycopg 3, autocommit, each transaction an explicit BEGIN … COMMIT
# (``conn.transaction()``), a commit durable under the server's settings (``durability`` reports them).


def _pg_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, application_name="checkpoint-bench")


def durability(url: str) -> dict[str, str]:
    """The server settings that decide what a commit costs."""
    names = ("synchronous_commit", "fsync", "wal_sync_method", "full_page_writes", "commit_delay", "server_version")
    with _pg_connect(url) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}


class PgCommitFloor:
    """One ``BEGIN; INSERT; COMMIT`` on PostgreSQL, as the journal runs a transaction."""

    def __init__(self, url: str, table: str = "bench_commit_floor") -> None:
        self._conn = _pg_connect(url)
        self._table = table
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (k BIGINT PRIMARY KEY, v TEXT NOT NULL)")
        self._conn.execute(f"TRUNCATE {table}")
        self._next = 1
        self._conn.execute("SET synchronous_commit = off")  # priming only: fill the WAL's first pages fast
        for _ in range(PRIME_COMMITS):
            self.timed_commit()
        self._conn.execute("SET synchronous_commit = on")

    def timed_commit(self) -> int:
        """One durable INSERT + COMMIT, in nanoseconds."""
        start = time.perf_counter_ns()
        with self._conn.transaction():
            self._conn.execute(f"INSERT INTO {self._table} (k, v) VALUES (%s, %s)", (self._next, _ROW))
        elapsed = time.perf_counter_ns() - start
        self._next += 1
        return elapsed

    def timed_round_trip(self) -> int:
        """One ``SELECT 1``: the network and protocol cost of any statement, in nanoseconds."""
        start = time.perf_counter_ns()
        self._conn.execute("SELECT 1").fetchone()
        return time.perf_counter_ns() - start

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


class PgJournalStatements:
    """``JournalStatements`` on PostgreSQL: a journaled call's statements and two commits, without the proxy, on
    a database whose schema the proxy's own code made, as a workflow of its own."""

    def __init__(self, url: str, workflow: str = "bench-journal-sql-alone") -> None:
        self._conn = _pg_connect(url)
        self._workflow = workflow
        self._conn.execute("DELETE FROM calls WHERE workflow_id = %s", (workflow,))
        self._next = 1
        self._conn.execute("SET synchronous_commit = off")
        for _ in range(PRIME_COMMITS // 4):
            self.timed_call()
        self._conn.execute("SET synchronous_commit = on")

    def timed_call(self) -> int:
        """Both transactions of one call, in nanoseconds."""
        seq, workflow, stamp = self._next, self._workflow, "2026-01-01T00:00:00.000Z"
        start = time.perf_counter_ns()
        with self._conn.transaction():
            self._conn.execute("SELECT * FROM calls WHERE workflow_id = %s AND seq = %s", (workflow, seq)).fetchone()
            self._conn.execute(
                "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at)"
                " VALUES (%s, %s, 'echo', %s, %s, 'PENDING', %s)",
                (workflow, seq, f'{{"n":{seq}}}', f"{seq:064x}", stamp),
            )
        with self._conn.transaction():
            self._conn.execute(
                "UPDATE calls SET state = 'COMPLETED', outcome = %s, finished_at = %s"
                " WHERE workflow_id = %s AND seq = %s AND state = 'PENDING'",
                (_ROW, stamp, workflow, seq),
            )
        elapsed = time.perf_counter_ns() - start
        self._next += 1
        return elapsed

    def timed_call_two_statements(self) -> int:
        """The same two rows written by two single-statement (autocommit) transactions, in nanoseconds: ``INSERT
        … ON CONFLICT DO NOTHING RETURNING`` (the read before the insert, in the same statement) and the ``UPDATE``.
        Each commits as durably, in one round trip instead of four and three: a shape the journal could take."""
        seq, workflow, stamp = self._next, self._workflow, "2026-01-01T00:00:00.000Z"
        start = time.perf_counter_ns()
        self._conn.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at)"
            " VALUES (%s, %s, 'echo', %s, %s, 'PENDING', %s) ON CONFLICT DO NOTHING RETURNING seq",
            (workflow, seq, f'{{"n":{seq}}}', f"{seq:064x}", stamp),
        ).fetchone()
        self._conn.execute(
            "UPDATE calls SET state = 'COMPLETED', outcome = %s, finished_at = %s"
            " WHERE workflow_id = %s AND seq = %s AND state = 'PENDING'",
            (_ROW, stamp, workflow, seq),
        )
        elapsed = time.perf_counter_ns() - start
        self._next += 1
        return elapsed

    def close(self) -> None:
        """Remove this workflow's rows and close the connection."""
        self._conn.execute("DELETE FROM calls WHERE workflow_id = %s", (self._workflow,))
        self._conn.close()
