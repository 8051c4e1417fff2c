"""The SQLite journal's busy timeout around ``write_now`` (issue 30): the proxy's own commits run without one and
set it once, not twice per commit; whatever else the connection runs still waits for a lock held elsewhere."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from checkpoint_mcp.journal.base import Batch
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sqlite import SqliteJournal

HELD_SECONDS = 0.3


@pytest.fixture
def journal(tmp_path: Path) -> SqliteJournal:
    return SqliteJournal(str(tmp_path / "j.db"))


def batch_of(journal: SqliteJournal, seq: int, finish: bool = False) -> Batch:
    unit = journal.unit()
    if finish:
        unit.finish("wf", seq, CallState.COMPLETED, '{"content":[]}')
    else:
        unit.reserve("wf", seq, NewCall("send", '{"to":"a"}', f"sig{seq}"))
    batch = unit.take()
    assert batch is not None
    return batch


def hold_lock(path: str, released: threading.Event, statement: str = "BEGIN IMMEDIATE") -> threading.Thread:
    """Another connection that takes a lock with ``statement`` and lets it go after HELD_SECONDS."""
    taken = threading.Event()

    def run() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute(statement)
        taken.set()
        time.sleep(HELD_SECONDS)
        other.execute("COMMIT")
        other.close()
        released.set()

    thread = threading.Thread(target=run)
    thread.start()
    assert taken.wait(5)
    return thread


def test_commits_here_set_the_busy_timeout_once_not_for_each_commit(journal: SqliteJournal) -> None:
    statements: list[str] = []
    journal._con.set_trace_callback(statements.append)
    for seq in range(1, 4):
        assert journal.write_now([batch_of(journal, seq)])
        assert journal.write_now([batch_of(journal, seq, finish=True)])
    journal._con.set_trace_callback(None)
    assert [s for s in statements if "busy_timeout" in s] == ["PRAGMA busy_timeout = 0"]
    assert statements.count("COMMIT") == 6
    assert [r.state for r in journal.calls("wf")] == [CallState.COMPLETED] * 3


def test_after_a_commit_here_a_transaction_still_waits_for_a_lock_held_elsewhere(journal: SqliteJournal) -> None:
    assert journal.write_now([batch_of(journal, 1)])
    released = threading.Event()
    thread = hold_lock(journal.path, released)
    assert journal.write_now([batch_of(journal, 2)]) is False  # the proxy's own commit does not wait
    journal.record_event("wf", "settled", None, {"by": "test"})  # an operator's write waits its turn
    assert released.is_set()
    thread.join()
    assert [r.seq for r in journal.calls("wf")] == [1]


# In WAL mode a read meets a lock only in rare moments (another connection recovering the WAL); a statement that
# writes on its own outside a transaction meets the write lock, and takes the same path through ``execute``.
ADD_WORKFLOW = "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('other', 'other', 'now')"


def test_after_a_commit_here_a_statement_that_meets_a_lock_is_run_again_patiently(journal: SqliteJournal) -> None:
    assert journal.write_now([batch_of(journal, 1)])
    released = threading.Event()
    thread = hold_lock(journal.path, released)
    journal.execute(ADD_WORKFLOW)  # found the lock: changed nothing, run again with the busy timeout
    assert released.is_set()
    thread.join()
    assert journal.root_of("other") == "other"
    assert journal.write_now([batch_of(journal, 1, finish=True)])
    assert [r.state for r in journal.calls("wf")] == [CallState.COMPLETED]


def test_a_statement_still_gives_up_after_the_busy_timeout(
    journal: SqliteJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("checkpoint_mcp.journal.sqlite.BUSY_TIMEOUT_SECONDS", 0.05)
    assert journal.write_now([batch_of(journal, 1)])
    released = threading.Event()
    thread = hold_lock(journal.path, released)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            journal.execute(ADD_WORKFLOW)
        assert not released.is_set()
    finally:
        thread.join()
    assert journal.root_of("other") is None
