"""Losses of the agent's memory, as its client's session-start hook sees them: a new session, a resume, a clear, a
compaction.

`checkpoint brief --hook` runs at each (Claude Code's SessionStart with source ``startup``, ``resume``, ``clear``
or ``compact``, and the other clients' hooks) and records one row in every journal it reads (``session_starts``,
schema 7). A proxy reads the newest (``Journal.last_session_start``) when a call repeats one that its own session
answered: the agent that sent the original may since have forgotten it (a clear or a compaction leaves the proxy
running), and a repeat across a loss of memory is the resumed agent redoing what already happened, which its
tool's repeat rule catches (``within_session``, docs/policies.md).

Recording opens a connection of its own, writes one row and closes it: the resume brief's readers stay read-only.
Never raises: a journal that cannot be written now (locked, older than schema 7, gone) is skipped with a reason.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Final

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal.schema import POSTGRES_APPLICATION, SQLITE_APPLICATION_ID

SOURCES: Final = ("startup", "resume", "clear", "compact")
"""The session-start sources Claude Code names; any other (or none) is recorded as ``unknown``."""

INSERT: Final = "INSERT INTO session_starts (at, source, detail) VALUES (?, ?, ?)"
NEWEST: Final = "SELECT at FROM session_starts ORDER BY id DESC LIMIT 1"
_FIRST_SCHEMA: Final = 7
_WAIT_SECONDS: Final = 2.0


def source_of(hook_input: Any) -> str:
    """The session-start source a hook's JSON input names (``startup``, ``resume``, ``clear``, ``compact``), else
    ``unknown``."""
    source = hook_input.get("source") if isinstance(hook_input, Mapping) else None
    return source if isinstance(source, str) and source in SOURCES else "unknown"


def record(location: str, source: str, detail: Mapping[str, Any] | None = None) -> str | None:
    """Record a session start in the journal at ``location`` (a path or a ``postgresql://`` URL); None when it is
    recorded, else why not (nothing was written)."""
    text = json.dumps(dict(detail or {}), sort_keys=True, separators=(",", ":"))
    row = (utc_now(), source if source in SOURCES else "unknown", text)
    try:
        if location.startswith(("postgres://", "postgresql://")):
            return _record_postgres(location, row)
        return _record_sqlite(location, row)
    except Exception as exc:  # a hook must never fail for this: the brief goes on without the mark
        return f"{type(exc).__name__}: {exc}"


def _record_sqlite(path: str, row: tuple[str, str, str]) -> str | None:
    import sqlite3

    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        return "no journal there yet"
    con = sqlite3.connect(path, timeout=_WAIT_SECONDS)
    try:
        application = int(con.execute("PRAGMA application_id").fetchone()[0])
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if application != SQLITE_APPLICATION_ID:
            return "not a Checkpoint journal"
        if version < _FIRST_SCHEMA:
            return f"schema {version}: a proxy migrates it when it next opens it"
        with con:
            con.execute(INSERT, row)
    finally:
        con.close()
    return None


def _record_postgres(url: str, row: tuple[str, str, str]) -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    with psycopg.connect(url, autocommit=True, connect_timeout=5, application_name="checkpoint-brief") as conn:
        meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM checkpoint_meta").fetchall())
        if meta.get("application") != POSTGRES_APPLICATION:
            return "not a Checkpoint journal"
        version = int(meta.get("schema_version", "0"))
        if version < _FIRST_SCHEMA:
            return f"schema {version}: a proxy migrates it when it next opens it"
        conn.execute(INSERT.replace("?", "%s"), row)
    return None
