"""Losses of the agent's memory, as its client's session-start hook sees them: a new session, a resume, a clear, a
compaction; and which client session each came from.

`checkpoint brief --hook` runs at each (Claude Code's SessionStart with source ``startup``, ``resume``, ``clear``
or ``compact``, and the other clients' hooks and plugins) and records one row in every journal it reads
(``session_starts``, schema 7), naming the client processes it ran under (``clients``, schema 8: its ancestors,
``client_process``). A proxy whose client is one of them (its parent: the client starts its servers as its
children) reads the newest such start (``Journal.session_starts``) when a call repeats one that its own session
answered: the agent that sent the original may since have forgotten it (a clear or a compaction leaves the proxy
running), and a repeat across a loss of memory is the resumed agent redoing what already happened, which its tool's
repeat rule catches (``within_session``, docs/policies.md). A start of another client session (another terminal,
another client of the project) marks nothing of this one. A start whose client could not be known (``clients``
NULL: a platform where processes cannot be read, a journal of schema 7) marks every session, as all did before.

Whether a client records its starts at all is the other half (``SessionStarts.known``): where it never has (Claude
Desktop, which runs no hooks; a client whose hook is off), the proxy cannot tell its sessions apart, and a repeat
within one proxy is asked about once instead of run (docs/sessions.md).

Recording opens a connection of its own, writes one row and closes it: the resume brief's readers stay read-only.
Where the journal does not exist yet (the first session of a project starts before any proxy made it), it is made
first, as a proxy would. Never raises: a journal that cannot be written now (locked, older than schema 7, a folder
that is not there) is skipped with a reason, which never holds the journal's password.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal.identity import Found, postgres_identity, sqlite_identity

SOURCES: Final = ("startup", "resume", "clear", "compact", "new")
"""The session-start sources the clients name (Claude Code's four; ``new``: VS Code's and Copilot CLI's); any other
(or none) is recorded as ``unknown``."""

INSERT: Final = "INSERT INTO session_starts (at, source, detail) VALUES (?, ?, ?)"
INSERT_FROM: Final = "INSERT INTO session_starts (at, source, detail, clients) VALUES (?, ?, ?, ?)"
NEWEST: Final = "SELECT at FROM session_starts ORDER BY id DESC LIMIT 1"
NEWEST_FOR: Final = "SELECT at FROM session_starts WHERE clients IS NULL OR clients LIKE ? ORDER BY id DESC LIMIT 1"
OWN: Final = "SELECT 1 FROM session_starts WHERE clients LIKE ? LIMIT 1"
_NO_JOURNAL: Final = "no journal there yet"
_FIRST_SCHEMA: Final = 7
_CLIENTS_SCHEMA: Final = 8
_WAIT_SECONDS: Final = 2.0


class SessionStarts(NamedTuple):
    """What the session starts recorded say to one client session's proxy."""

    newest: str | None
    """When the newest start that concerns it was recorded (its client's own, or one whose client is unknown)."""
    known: bool
    """Whether its client records its session starts at all (then a start after a call means a loss of memory,
    and no start means none): its sessions' boundaries are known."""


def pattern(client: str) -> str:
    """The ``LIKE`` pattern of the starts recorded under ``client`` (a ``pid:start``, ``client_process``)."""
    return f"% {client} %"


def source_of(hook_input: Any) -> str:
    """The session-start source a hook's JSON input names (``startup``, ``resume``, ``clear``, ``compact``, ``new``),
    else ``unknown``."""
    source = hook_input.get("source") if isinstance(hook_input, Mapping) else None
    return source if isinstance(source, str) and source in SOURCES else "unknown"


def session_of(hook_input: Any) -> str | None:
    """The client's own id of the session a hook's JSON input names (Claude Code's ``session_id``, VS Code's
    ``sessionId``), kept in the record's detail for people; None if it names none."""
    if not isinstance(hook_input, Mapping):
        return None
    for key in ("session_id", "sessionId"):
        value = hook_input.get(key)
        if isinstance(value, str) and value:
            return value[:200]
    return None


def record(
    location: str, source: str, detail: Mapping[str, Any] | None = None, clients: Sequence[str] = ()
) -> str | None:
    """Record a session start in the journal at ``location`` (a path or a ``postgresql://`` URL), under the client
    processes ``clients`` (none: every session's); None when it is recorded, else why not (nothing was written)."""
    text = json.dumps(dict(detail or {}), sort_keys=True, separators=(",", ":"))
    row = (utc_now(), source if source in SOURCES else "unknown", text, f" {' '.join(clients)} " if clients else None)
    try:
        why = _recorded(location, row)
        if why == _NO_JOURNAL:
            # The first session of a project starts before any proxy made its journal: make it now, as a proxy would,
            # so that this start is on record too (else the session's own repeats would be asked about).
            from checkpoint_mcp.journal import open_journal

            open_journal(location).close()
            why = _recorded(location, row)
        return why
    except Exception as exc:  # a hook must never fail for this: the brief goes on without the mark
        return _scrubbed(f"{type(exc).__name__}: {exc}", location)


def _recorded(location: str, row: tuple[str, str, str, str | None]) -> str | None:
    if location.startswith(("postgres://", "postgresql://")):
        return _record_postgres(location, row)
    return _record_sqlite(location, row)


def _scrubbed(text: str, location: str) -> str:
    """``text`` without the password of ``location`` (``journal.scrubbed``)."""
    from checkpoint_mcp.journal import scrubbed

    try:
        return scrubbed(text, location)
    except ValueError:
        return "the journal's URL cannot be read"


def _statement(version: int, row: tuple[str, str, str, str | None]) -> tuple[str, tuple[Any, ...]]:
    """The insert a journal of schema ``version`` takes (before 8 it has no ``clients``: the start marks all)."""
    if version >= _CLIENTS_SCHEMA:
        return INSERT_FROM, row
    return INSERT, row[:3]


def _record_sqlite(path: str, row: tuple[str, str, str, str | None]) -> str | None:
    import sqlite3

    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(path):
        return _NO_JOURNAL if os.path.isdir(os.path.dirname(path)) else "its folder does not exist"
    con = sqlite3.connect(path, timeout=_WAIT_SECONDS)
    try:
        found, version = sqlite_identity(con.execute)
        if found is not Found.JOURNAL:
            return "not a Checkpoint journal"
        if version < _FIRST_SCHEMA:
            return f"schema {version}: a proxy migrates it when it next opens it"
        with con:
            con.execute(*_statement(version, row))
    finally:
        con.close()
    return None


def _record_postgres(url: str, row: tuple[str, str, str, str | None]) -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    with psycopg.connect(url, autocommit=True, connect_timeout=5, application_name="checkpoint-brief") as conn:
        found, version = postgres_identity(conn.execute)
        if found in (Found.EMPTY, Found.UNMARKED):
            return _NO_JOURNAL
        if found is not Found.JOURNAL:
            return "not a Checkpoint journal"
        if version < _FIRST_SCHEMA:
            return f"schema {version}: a proxy migrates it when it next opens it"
        sql, params = _statement(version, row)
        conn.execute(sql.replace("?", "%s"), params)
    return None
