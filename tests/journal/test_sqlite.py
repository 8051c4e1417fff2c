"""The SQLite journal on real files: durability settings, state changes, and refusing what it must not touch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from checkpoint_mcp.errors import JournalCorrupt, JournalUnavailable, JournalVersionError
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
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


def test_a_reserved_call_is_visible_in_its_unit_and_to_others_once_committed(
    journal: SqliteJournal, tmp_path: Path
) -> None:
    lineage = journal.lineage("wf")
    unit = journal.unit()
    unit.reserve("wf", 1, NewCall("send", '{"to":"a"}', "sig"))
    pending = unit.read(lineage, 1)
    assert pending is not None  # the unit sees its own pending row
    assert pending.state is CallState.PENDING
    assert journal.calls("wf") == []  # nobody else does before the commit
    unit.commit()
    assert unit.empty
    other = sqlite3.connect(tmp_path / "j.db")
    assert other.execute("SELECT state FROM calls").fetchall() == [("PENDING",)]
    other.close()


def test_one_commit_writes_many_calls_of_both_kinds(journal: SqliteJournal) -> None:
    lineage = journal.lineage("wf")
    unit = journal.unit()
    for seq in (1, 2, 3):
        unit.reserve("wf", seq, NewCall("send", "{}", f"sig{seq}", key=f"k{seq}"))
    unit.commit()
    unit.finish("wf", 1, CallState.COMPLETED, '{"ok":true}')
    unit.finish("wf", 2, CallState.FAILED, '{"code":1,"message":"m"}')
    unit.reserve("wf", 4, NewCall("send", "{}", "sig4"))
    assert unit.read_key(lineage, "k2") is not None
    unit.commit()
    states = {r.seq: r.state for r in journal.calls("wf")}
    assert states == {1: CallState.COMPLETED, 2: CallState.FAILED, 3: CallState.PENDING, 4: CallState.PENDING}
    [record] = [r for r in journal.calls("wf") if r.seq == 1]
    assert record.outcome == '{"ok":true}'
    assert record.finished_at is not None
    assert journal.max_seq(journal.lineage("wf")) == 4
    assert journal.max_seq(journal.lineage("other")) == 0


def test_finishing_a_call_that_is_no_longer_pending_changes_nothing(journal: SqliteJournal) -> None:
    unit = journal.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig"))
    unit.commit()
    unit.finish("wf", 1, CallState.COMPLETED, '{"ok":true}')
    unit.commit()
    unit.finish("wf", 1, CallState.FAILED, "{}")
    unit.commit()
    [record] = journal.calls("wf")
    assert record.state is CallState.COMPLETED


def test_a_failed_commit_writes_nothing_of_its_unit(journal: SqliteJournal) -> None:
    unit = journal.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig"))
    unit.reserve("wf", 1, NewCall("send", "{}", "sig"))  # the same key twice: the transaction fails as a whole
    with pytest.raises(JournalUnavailable):
        unit.commit()
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


def test_a_write_lock_held_elsewhere_makes_the_commit_unavailable(
    journal: SqliteJournal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal._con.execute("PRAGMA busy_timeout = 100")
    other = sqlite3.connect(tmp_path / "j.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        unit = journal.unit()
        unit.reserve("wf", 1, NewCall("t", "{}", "s"))
        with pytest.raises(JournalUnavailable, match="locked"):
            unit.commit()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert journal.calls("wf") == []


def test_every_write_of_a_unit_leaves_its_event_in_the_same_commit_and_record_event_its_own(
    journal: SqliteJournal, tmp_path: Path
) -> None:
    journal.lineage("wf")
    unit = journal.unit()
    unit.reserve("wf", 1, NewCall("send", '{"to":"a"}', "sig1"))
    unit.record_event("wf", "repeat", 1, {"reason": "same signature"})
    unit.commit()
    unit.finish("wf", 1, CallState.COMPLETED, '{"ok":true}')
    unit.finish("wf", 9, CallState.COMPLETED, '{"ok":true}')  # no such PENDING call: nothing changes, no event
    unit.commit()
    journal.record_event("wf", "settled", None, {"by": "probe"})
    other = sqlite3.connect(tmp_path / "j.db")
    rows = other.execute("SELECT seq, kind, prev_hash, hash FROM events ORDER BY id").fetchall()
    other.close()
    assert [(seq, kind) for seq, kind, _, _ in rows] == [
        (1, "reserved"),
        (1, "repeat"),
        (1, "completed"),
        (None, "settled"),
    ]
    assert rows[0][2] == ""
    assert all(rows[i][2] == rows[i - 1][3] for i in range(1, len(rows)))  # each link names the one before
    with pytest.raises(ValueError, match="not representable"):
        journal.record_event("wf", "bad", None, {"x": float("nan")})


def test_finishes_committed_together_leave_events_only_for_the_calls_they_changed(
    journal: SqliteJournal, tmp_path: Path
) -> None:
    unit = journal.unit()
    for seq in (1, 2, 3, 4):
        unit.reserve("wf", seq, NewCall("send", "{}", f"sig{seq}"))
    unit.commit()
    unit.finish("wf", 2, CallState.FAILED, '{"code":1}')
    unit.commit()
    unit.finish("wf", 1, CallState.COMPLETED, '{"n":1}')
    unit.finish("wf", 2, CallState.COMPLETED, '{"n":2}')  # already FAILED: left alone, no event
    unit.finish("wf", 3, CallState.COMPLETED, '{"n":3}')
    unit.commit()
    unit.finish("wf", 4, CallState.COMPLETED, '{"n":4}')
    unit.finish("wf", 4, CallState.FAILED, '{"n":5}')  # the same call twice in one commit: the first one counts
    unit.commit()
    rows = {r.seq: (r.state, r.outcome) for r in journal.calls("wf")}
    assert rows == {
        1: (CallState.COMPLETED, '{"n":1}'),
        2: (CallState.FAILED, '{"code":1}'),
        3: (CallState.COMPLETED, '{"n":3}'),
        4: (CallState.COMPLETED, '{"n":4}'),
    }
    other = sqlite3.connect(tmp_path / "j.db")
    kinds = other.execute("SELECT seq, kind FROM events WHERE kind != 'reserved' ORDER BY id").fetchall()
    other.close()
    assert kinds == [(2, "failed"), (1, "completed"), (3, "completed"), (4, "completed")]
