"""The SQLite journal remembers each chain's head between its own commits (issue 30): a journaled call's commits
read no head, and a head another connection moved meanwhile is caught (the link ids are not consecutive) and
followed, never forked."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from checkpoint_mcp.journal import chain, operations
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sqlite import SqliteJournal

from support import effects_proxy

KEY = b"audit-key"


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "j.db")


def traced(journal: SqliteJournal) -> list[str]:
    statements: list[str] = []
    journal._con.set_trace_callback(statements.append)
    return statements


def call(journal: SqliteJournal, seq: int, workflow: str = "wf") -> None:
    """One journaled call's two commits: reserved, then completed."""
    unit = journal.unit()
    unit.reserve(workflow, seq, NewCall("send", '{"to":"a"}', f"sig{seq}"))
    unit.commit()
    unit.finish(workflow, seq, CallState.COMPLETED, '{"content":[]}')
    unit.commit()


def assert_linear(journal: SqliteJournal, workflow: str, key: bytes | None = None) -> list[chain.Link]:
    """The chain verifies, and each link follows the one stored before it (no fork, nothing lost)."""
    links = journal.links(workflow)
    assert [link.prev for link in links] == ["", *(link.hash for link in links[:-1])]
    assert [chain.position(link.hash) for link in links] == list(range(1, len(links) + 1))
    [report] = operations.verify(journal, workflow, key)
    assert report.ok, report.breaks
    return links


def test_a_journaled_call_reads_no_chain_head_once_its_connection_wrote_the_chain(path: str) -> None:
    journal = SqliteJournal(path)
    journal.lineage("wf")
    call(journal, 1)  # the first commit reads the head
    statements = traced(journal)
    call(journal, 2)
    verbs = [
        sql.split(" ", 2)[0] + (" " + sql.split(" ", 3)[2] if sql.startswith("INSERT") else "") for sql in statements
    ]
    # Per commit: BEGIN, the call's row, its link, COMMIT.
    assert verbs == ["BEGIN", "INSERT calls", "INSERT events", "COMMIT", "BEGIN", "UPDATE", "INSERT events", "COMMIT"]
    assert not [sql for sql in statements if sql.startswith("SELECT")]
    assert_linear(journal, "wf")
    journal.close()


def test_links_another_connection_appended_meanwhile_are_followed_not_forked(path: str) -> None:
    journal, other = SqliteJournal(path), SqliteJournal(path)
    journal.lineage("wf")
    call(journal, 1)
    other.record_event("wf", "note", None, {"by": "operator"})  # the remembered head is now stale
    statements = traced(journal)
    call(journal, 2)
    journal._con.set_trace_callback(None)
    kinds = [link.kind for link in assert_linear(journal, "wf")]
    assert kinds == ["reserved", "completed", "note", "reserved", "completed"]
    reserve, finish = statements[: statements.index("COMMIT") + 1], statements[statements.index("COMMIT") + 1 :]
    assert [sql.split(" ")[0] for sql in reserve if sql.startswith(("SELECT", "DELETE"))] == [
        "SELECT",
        "DELETE",
        "SELECT",
    ]
    assert not [sql for sql in finish if sql.startswith(("SELECT", "DELETE"))]  # the head it wrote, remembered
    other.record_event("wf", "note", None, {"by": "operator", "again": True})
    call(journal, 3)
    assert [link.kind for link in assert_linear(journal, "wf")][-3:] == ["note", "reserved", "completed"]
    journal.close()
    other.close()


def test_links_another_connection_added_to_another_chain_cost_one_read_and_nothing_else(path: str) -> None:
    journal, other = SqliteJournal(path), SqliteJournal(path)
    journal.lineage("wf")
    call(journal, 1)
    other.lineage("elsewhere")
    call(other, 1, "elsewhere")
    statements = traced(journal)
    call(journal, 2)
    assert [sql.split(" ")[0] for sql in statements if sql.startswith(("SELECT", "DELETE"))] == ["SELECT"]
    assert [link.kind for link in assert_linear(journal, "wf")] == ["reserved", "completed"] * 2
    assert [link.kind for link in assert_linear(journal, "elsewhere")] == ["reserved", "completed"]
    journal.close()
    other.close()


def test_one_commit_over_a_stale_chain_and_a_current_one_stores_every_link_once(path: str) -> None:
    journal, other = SqliteJournal(path), SqliteJournal(path)
    for workflow in ("a", "b"):
        journal.lineage(workflow)
        call(journal, 1, workflow)
    other.record_event("b", "note", None, {"n": 1})
    unit = journal.unit()
    for seq in (2, 3):
        for workflow in ("a", "b"):
            unit.reserve(workflow, seq, NewCall("send", "{}", f"sig{seq}"))
    unit.commit()
    assert [link.kind for link in assert_linear(journal, "a")] == ["reserved", "completed", "reserved", "reserved"]
    assert [(link.kind, link.seq) for link in assert_linear(journal, "b")][2:] == [
        ("note", None),
        ("reserved", 2),
        ("reserved", 3),
    ]
    journal.close()
    other.close()


def test_keyed_links_made_again_after_a_stale_head_are_still_authenticated(path: str) -> None:
    journal, other = SqliteJournal(path, audit_key=KEY), SqliteJournal(path, audit_key=KEY)
    journal.lineage("wf")
    call(journal, 1)
    other.record_event("wf", "note", None, {"keyed": True})
    call(journal, 2)
    links = assert_linear(journal, "wf", KEY)
    assert [link.kind for link in links] == ["reserved", "completed", "note", "reserved", "completed"]
    assert all(chain.keyed(link.hash) for link in links)
    [unkeyed] = operations.verify(journal, "wf", b"another key")
    assert [b.kind for b in unkeyed.breaks] == ["edited"]
    journal.close()
    other.close()


def test_a_rolled_back_transaction_forgets_the_heads_it_wrote(path: str) -> None:
    journal = SqliteJournal(path)
    journal.lineage("wf")
    call(journal, 1)

    def note_then_give_up() -> None:
        with journal.transaction():
            journal.link_txn([chain.Event("wf", "note", None, "{}", "2026-01-01T00:00:00.000Z")])
            raise RuntimeError("the caller gave up")

    with pytest.raises(RuntimeError):
        note_then_give_up()
    statements = traced(journal)
    call(journal, 2)
    # Read again (one SELECT), not tried against a head that was rolled back (nothing deleted, linked again).
    assert [sql.split(" ")[0] for sql in statements if sql.startswith(("SELECT", "DELETE"))] == ["SELECT"]
    assert len([sql for sql in statements if sql.startswith("INSERT INTO events")]) == 2
    assert [link.kind for link in assert_linear(journal, "wf")] == ["reserved", "completed"] * 2
    journal.close()


def test_a_running_proxy_follows_an_event_another_process_recorded_and_the_journal_verifies(
    path: str, tmp_path: Path
) -> None:
    with effects_proxy(path, tmp_path, "--workflow-id", "wf") as proxy:
        for to in ("a", "b"):
            assert "result" in proxy.call("send_email", {"to": to})
        other = SqliteJournal(path)
        other.record_event("wf", "note", None, {"from": "another process"})
        other.close()
        for to in ("c", "d"):
            assert "result" in proxy.call("send_email", {"to": to})
        assert proxy.close() == 0
    con = sqlite3.connect(path)
    try:
        kinds = [row[0] for row in con.execute("SELECT kind FROM events WHERE workflow_id = 'wf' ORDER BY id")]
    finally:
        con.close()
    assert kinds == ["reserved", "completed"] * 2 + ["note"] + ["reserved", "completed"] * 2
    journal = SqliteJournal(path)
    assert_linear(journal, "wf")
    journal.close()
    assert os.path.exists(path)
