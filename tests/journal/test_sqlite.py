"""The SQLite journal on real files: durability settings, state changes, and refusing what it must not touch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from checkpoint_mcp.errors import JournalCorrupt, JournalUnavailable, JournalVersionError
from checkpoint_mcp.journal.base import CallState
from checkpoint_mcp.journal.sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteJournal


@pytest.fixture
def journal(tmp_path: Path):  # type: ignore[no-untyped-def]
    j = SqliteJournal(str(tmp_path / "j.db"))
    yield j
    j.close()


def test_a_new_journal_is_in_wal_mode_with_full_synchronous_commits(journal: SqliteJournal) -> None:
    con = journal._con  # the pragmas are per connection: check the one the journal writes with
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_reserved_call_is_visible_to_another_connection_once_committed(
    journal: SqliteJournal, tmp_path: Path
) -> None:
    lineage = journal.lineage("wf")
    with journal.batch() as batch:
        batch.reserve("wf", 1, "send", '{"to":"a"}', "sig")
        assert batch.read(lineage, 1) is not None  # visible inside the transaction
        other = sqlite3.connect(tmp_path / "j.db")
        assert other.execute("SELECT count(*) FROM calls").fetchone()[0] == 0  # not before the commit
        other.close()
    other = sqlite3.connect(tmp_path / "j.db")
    assert other.execute("SELECT state FROM calls").fetchall() == [("PENDING",)]
    other.close()


def test_finish_moves_only_pending_rows(journal: SqliteJournal) -> None:
    with journal.batch() as batch:
        batch.reserve("wf", 1, "send", "{}", "sig")
    with journal.batch() as batch:
        assert batch.finish("wf", 1, CallState.COMPLETED, '{"ok":true}') is True
    with journal.batch() as batch:
        assert batch.finish("wf", 1, CallState.FAILED, "{}") is False
    [record] = journal.calls("wf")
    assert record.state is CallState.COMPLETED
    assert record.outcome == '{"ok":true}'
    assert record.finished_at is not None
    assert journal.max_seq(journal.lineage("wf")) == 1
    assert journal.max_seq(journal.lineage("other")) == 0


def test_an_exception_inside_a_batch_rolls_everything_back(journal: SqliteJournal) -> None:
    def write_then_fail() -> None:
        with journal.batch() as batch:
            batch.reserve("wf", 1, "send", "{}", "sig")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail()
    assert journal.calls("wf") == []


def test_a_journal_from_a_newer_checkpoint_is_refused_and_not_modified(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.execute("CREATE TABLE future (x)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(JournalVersionError, match="newer than this Checkpoint supports"):
        SqliteJournal(str(path))
    assert path.read_bytes() == before
    assert not Path(str(path) + "-wal").exists()


def test_an_sqlite_file_of_another_application_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (name)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(JournalCorrupt, match="not a Checkpoint journal"):
        SqliteJournal(str(path))
    assert path.read_bytes() == before


def test_a_damaged_file_is_refused_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    SqliteJournal(str(path)).close()
    data = bytearray(path.read_bytes())
    data[0:16] = b"garbage garbage!"
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt):
        SqliteJournal(str(path))


def test_a_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(JournalUnavailable, match="does not exist"):
        SqliteJournal(str(tmp_path / "nope" / "j.db"))


def test_a_write_lock_held_elsewhere_makes_the_batch_unavailable(
    journal: SqliteJournal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal._con.execute("PRAGMA busy_timeout = 100")
    other = sqlite3.connect(tmp_path / "j.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(JournalUnavailable, match="locked"), journal.batch() as batch:
            batch.reserve("wf", 1, "t", "{}", "s")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert journal.calls("wf") == []
