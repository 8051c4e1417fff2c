"""What a database holds, as a journal's opener sees it first: nothing yet, another application's tables, or a
Checkpoint journal of schema N.

The one place that reads a journal's mark, once per database: ``PRAGMA application_id`` and ``PRAGMA user_version``
in SQLite, the ``checkpoint_meta`` table in PostgreSQL (``schema.py`` names the marks). Each caller keeps its own
policy about what it found: the proxy's journal creates or migrates (``sqlite.py``, ``postgres.py``), the resume
brief's reader needs ``digest.OLDEST_SCHEMA`` (``read_only.py``), the session-start hook needs schema 7
(``session_starts.py``). Standard library only: the hook's fast path imports it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

from checkpoint_mcp.journal.schema import POSTGRES_APPLICATION, SQLITE_APPLICATION_ID

Execute = Callable[[str], Any]
"""A connection's ``execute`` (sqlite3's or psycopg's): one statement without parameters, a cursor back."""


class Found(enum.Enum):
    """What a database holds."""

    EMPTY = "empty"  # no mark and nothing of a journal's: a journal may be made there
    UNMARKED = "unmarked"  # no mark, yet tables a journal would have (SQLite: any table; PostgreSQL: ``calls``)
    FOREIGN = "foreign"  # marked as another application's
    JOURNAL = "journal"  # a Checkpoint journal


class Identity(NamedTuple):
    """What a database holds, and the schema version it says it is at (0 where it says none)."""

    found: Found
    version: int = 0

    @property
    def journal(self) -> bool:
        """True for a Checkpoint journal (of any version)."""
        return self.found is Found.JOURNAL


def sqlite_identity(execute: Execute) -> Identity:
    """What the SQLite file behind ``execute`` holds. Read it inside a transaction where another process may be
    making the journal meanwhile, so that its first migration is seen whole or not at all."""
    application_id = int(execute("PRAGMA application_id").fetchone()[0])
    version = int(execute("PRAGMA user_version").fetchone()[0])
    if application_id == SQLITE_APPLICATION_ID:
        return Identity(Found.JOURNAL, version)
    if application_id != 0:
        return Identity(Found.FOREIGN, version)
    if int(execute("SELECT count(*) FROM sqlite_master").fetchone()[0]) > 0:
        return Identity(Found.UNMARKED, version)
    return Identity(Found.EMPTY, version)


def postgres_identity(execute: Execute) -> Identity:
    """What the current schema of the PostgreSQL database behind ``execute`` holds."""
    tables = {
        row[0]
        for row in execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    if "checkpoint_meta" not in tables:
        return Identity(Found.UNMARKED if "calls" in tables else Found.EMPTY)
    meta = {str(key): str(value) for key, value in execute("SELECT key, value FROM checkpoint_meta").fetchall()}
    if meta.get("application") != POSTGRES_APPLICATION:
        return Identity(Found.FOREIGN)
    return Identity(Found.JOURNAL, int(meta.get("schema_version", "0")))
