"""What a database holds, read in one place per database (``journal/identity.py``), and what each opener makes of it:
a real SQLite file and a real PostgreSQL database in each of the four states."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from checkpoint_mcp.errors import JournalCorrupt, JournalUnavailable
from checkpoint_mcp.journal import open_journal, session_starts
from checkpoint_mcp.journal.identity import Found, Identity, postgres_identity, sqlite_identity
from checkpoint_mcp.journal.read_only import open_reader
from checkpoint_mcp.journal.schema import SCHEMA_VERSION


def _sqlite_file(path: Path, *statements: str) -> str:
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return str(path)


def _sqlite_identity(path: str) -> Identity:
    con = sqlite3.connect(path)
    try:
        return sqlite_identity(con.execute)
    finally:
        con.close()


def test_an_sqlite_file_is_told_empty_unmarked_foreign_or_a_journal_of_its_schema(tmp_path: Path) -> None:
    empty = _sqlite_file(tmp_path / "empty.db")
    unmarked = _sqlite_file(tmp_path / "unmarked.db", "CREATE TABLE notes (id INTEGER)")
    foreign = _sqlite_file(tmp_path / "foreign.db", "PRAGMA application_id = 7")
    journal = str(tmp_path / "journal.db")
    open_journal(journal).close()

    assert _sqlite_identity(empty) == Identity(Found.EMPTY)
    assert _sqlite_identity(unmarked) == Identity(Found.UNMARKED)
    assert _sqlite_identity(foreign).found is Found.FOREIGN
    assert _sqlite_identity(journal) == Identity(Found.JOURNAL, SCHEMA_VERSION)
    assert _sqlite_identity(journal).journal


def test_each_sqlite_opener_keeps_its_own_answer_to_what_is_not_a_journal(tmp_path: Path) -> None:
    unmarked = _sqlite_file(tmp_path / "unmarked.db", "CREATE TABLE notes (id INTEGER)")
    with pytest.raises(JournalCorrupt, match="is not a Checkpoint journal; refusing to touch it"):
        open_journal(unmarked)
    with pytest.raises(JournalUnavailable, match="is not a Checkpoint journal of schema 2 or later"):
        open_reader(unmarked)
    assert session_starts.record(unmarked, "startup") == "not a Checkpoint journal"

    empty = _sqlite_file(tmp_path / "empty.db")
    open_journal(empty).close()  # an empty file is where a proxy makes its journal
    assert _sqlite_identity(empty) == Identity(Found.JOURNAL, SCHEMA_VERSION)


def _pg_identity(url: str) -> Identity:
    with psycopg.connect(url, autocommit=True) as conn:
        return postgres_identity(conn.execute)


def test_a_postgresql_database_is_told_empty_unmarked_foreign_or_a_journal_of_its_schema(pg_url: str) -> None:
    assert _pg_identity(pg_url) == Identity(Found.EMPTY)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE calls (id int)")
    assert _pg_identity(pg_url) == Identity(Found.UNMARKED)
    with pytest.raises(JournalCorrupt, match="has a 'calls' table but is not a Checkpoint journal"):
        open_journal(pg_url)
    with pytest.raises(JournalUnavailable, match="holds no Checkpoint journal"):
        open_reader(pg_url)

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE calls")
        conn.execute("CREATE TABLE checkpoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO checkpoint_meta VALUES ('application', 'another-application')")
    assert _pg_identity(pg_url) == Identity(Found.FOREIGN)
    with pytest.raises(JournalCorrupt, match="is not a Checkpoint journal; refusing to touch it"):
        open_journal(pg_url)
    with pytest.raises(JournalUnavailable, match="is not a Checkpoint journal of schema 2 or later"):
        open_reader(pg_url)
    assert session_starts.record(pg_url, "startup") == "not a Checkpoint journal"

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE checkpoint_meta")
    open_journal(pg_url).close()
    assert _pg_identity(pg_url) == Identity(Found.JOURNAL, SCHEMA_VERSION)
