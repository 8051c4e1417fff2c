"""The embedded journal: one SQLite file in WAL mode with ``synchronous=FULL``.

A commit returns only after the WAL is fsynced, so a PENDING row is on disk before the upstream is called and
a COMPLETED row before the client sees the reply. The file is identified by ``PRAGMA application_id`` and
versioned by ``PRAGMA user_version``; a file that is not a Checkpoint journal, is damaged, or was written by a
newer Checkpoint is refused before anything is written to it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from checkpoint_mcp.errors import JournalCorrupt, JournalUnavailable, JournalVersionError
from checkpoint_mcp.journal.base import CallRecord, CallState, Journal, JournalBatch, utc_now

logger = logging.getLogger(__name__)

APPLICATION_ID = 0x43484B50  # "CHKP": marks the file as a Checkpoint journal
SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 5.0  # how long a writer waits for another process's transaction on the same file

_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """
        CREATE TABLE calls (
            workflow_id TEXT NOT NULL,
            seq INTEGER NOT NULL CHECK (seq > 0),
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL,
            signature TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('PENDING', 'COMPLETED', 'FAILED')),
            outcome TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            PRIMARY KEY (workflow_id, seq)
        )
        """,
    ),
}
"""version -> statements that bring a journal from version-1 to version."""

_COLUMNS = "workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at"


def _record(row: tuple[Any, ...]) -> CallRecord:
    return CallRecord(
        workflow=row[0],
        seq=row[1],
        tool=row[2],
        arguments=row[3],
        signature=row[4],
        state=CallState(row[5]),
        outcome=row[6],
        started_at=row[7],
        finished_at=row[8],
    )


@contextmanager
def _translated(location: str, action: str) -> Iterator[None]:
    """The one seam where sqlite3's exceptions become ours."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) or "locked" in text or "readonly" in text:
            raise JournalUnavailable(f"cannot {action} journal {location}: {text}") from exc
        raise JournalCorrupt(f"cannot {action} journal {location}: {text} (is it a Checkpoint journal?)") from exc


class _SqliteBatch(JournalBatch):
    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con

    def read(self, workflow: str, seq: int) -> CallRecord | None:
        row = self._con.execute(
            f"SELECT {_COLUMNS} FROM calls WHERE workflow_id = ? AND seq = ?",  # noqa: S608 (constant columns)
            (workflow, seq),
        ).fetchone()
        return _record(row) if row else None

    def reserve(self, workflow: str, seq: int, tool: str, arguments: str, signature: str) -> None:
        self._con.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at)"
            " VALUES (?, ?, ?, ?, ?, 'PENDING', ?)",
            (workflow, seq, tool, arguments, signature, utc_now()),
        )

    def finish(self, workflow: str, seq: int, state: CallState, outcome: str) -> bool:
        cursor = self._con.execute(
            "UPDATE calls SET state = ?, outcome = ?, finished_at = ?"
            " WHERE workflow_id = ? AND seq = ? AND state = 'PENDING'",
            (state.value, outcome, utc_now(), workflow, seq),
        )
        return cursor.rowcount == 1


class SqliteJournal(Journal):
    """A journal in one SQLite file; safe for several processes (different workflows) at once."""

    def __init__(self, path: str) -> None:
        """Open (creating if needed) the journal at ``path``.

        Raises:
            JournalUnavailable: the file or its directory cannot be opened or written.
            JournalCorrupt: the file is not a Checkpoint journal.
            JournalVersionError: the file was written by a newer Checkpoint.
        """
        self.path = os.path.abspath(os.path.expanduser(path))
        self.location = self.path
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise JournalUnavailable(f"cannot open journal {self.path}: directory {directory} does not exist")
        with _translated(self.path, "open"):
            self._con = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
            )
        try:
            self._prepare()
        except BaseException:
            self._con.close()
            raise

    def _prepare(self) -> None:
        with _translated(self.path, "open"):
            application_id = self._con.execute("PRAGMA application_id").fetchone()[0]
            version = self._con.execute("PRAGMA user_version").fetchone()[0]
            has_tables = self._con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if application_id != APPLICATION_ID and (has_tables or application_id != 0):
            raise JournalCorrupt(f"{self.path} is an SQLite file but not a Checkpoint journal; refusing to touch it")
        if version > SCHEMA_VERSION:
            raise JournalVersionError(version, SCHEMA_VERSION)
        with _translated(self.path, "open"):
            mode = self._con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise JournalUnavailable(f"cannot put journal {self.path} in WAL mode (got {mode!r})")
            self._con.execute("PRAGMA synchronous=FULL")
            if version < SCHEMA_VERSION:
                self._migrate(version)

    def _migrate(self, version: int) -> None:
        self._con.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = self._con.execute("PRAGMA user_version").fetchone()[0]
            for target in range(current + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target]:
                    self._con.execute(statement)
                logger.info("journal %s migrated to schema version %d", self.path, target)
            self._con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._con.execute("COMMIT")
        except BaseException:
            self._con.execute("ROLLBACK")
            raise

    def max_seq(self, workflow: str) -> int:
        """The highest sequence journaled for ``workflow``, 0 if none."""
        with _translated(self.path, "read"):
            row = self._con.execute("SELECT max(seq) FROM calls WHERE workflow_id = ?", (workflow,)).fetchone()
        return int(row[0] or 0)

    def read(self, workflow: str, seq: int) -> CallRecord | None:
        """The row at ``(workflow, seq)``, or None."""
        with _translated(self.path, "read"):
            return _SqliteBatch(self._con).read(workflow, seq)

    @contextmanager
    def batch(self) -> Iterator[JournalBatch]:
        """One write transaction, committed durably on exit.

        Raises:
            JournalUnavailable: the transaction could not start or commit (the batch's writes are gone).
        """
        with _translated(self.path, "write"):
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteBatch(self._con)
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            try:
                self._con.execute("COMMIT")
            except sqlite3.Error:
                if self._con.in_transaction:
                    self._con.execute("ROLLBACK")
                raise

    def calls(self, workflow: str) -> Iterator[CallRecord]:
        """Every row of ``workflow`` in sequence order."""
        with _translated(self.path, "read"):
            rows = self._con.execute(
                f"SELECT {_COLUMNS} FROM calls WHERE workflow_id = ? ORDER BY seq",  # noqa: S608
                (workflow,),
            ).fetchall()
        return iter([_record(row) for row in rows])

    def close(self) -> None:
        """Close the connection."""
        self._con.close()
