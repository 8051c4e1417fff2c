"""`--relaxed-completions`: outcomes committed without a sync, PENDING rows still synced before every call.

The trade is explicit (a flag, off by default): an outcome survives a crash of the proxy process, which these tests
prove by SIGKILL, but not a power loss, which would leave the call PENDING (in doubt, never re-run). What SQLite
was asked to do is read from SQLite itself (its statement trace), so the default's durability is checked too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sqlite import SqliteJournal
from checkpoint_mcp.refusals import IN_DOUBT

from support import checkpoint_argv, done_count, effects_proxy, journal_states

RELAXED = "PRAGMA synchronous=NORMAL"
SYNCED = "PRAGMA synchronous=FULL"


def _traced(journal: SqliteJournal) -> list[str]:
    statements: list[str] = []
    journal._con.set_trace_callback(statements.append)
    return statements


def _commit_levels(statements: list[str]) -> list[str]:
    """The connection's synchronous level at each COMMIT: FULL (synced) or NORMAL (relaxed)."""
    level, levels = "FULL", []
    for sql in statements:
        if sql in (RELAXED, SYNCED):
            level = sql.rsplit("=", 1)[1]
        elif sql == "COMMIT":
            levels.append(level)
    return levels


def test_only_a_commit_of_outcomes_alone_is_relaxed_and_only_when_asked(tmp_path: Path) -> None:
    journal = open_journal(str(tmp_path / "j.db"))
    assert isinstance(journal, SqliteJournal)
    try:
        head = journal.lineage("wf").head
        statements = _traced(journal)

        unit = journal.unit()
        unit.reserve(head, 1, NewCall("send_email", "{}", "sig-1"))
        unit.commit(relaxed=True)  # a PENDING row: synced whatever the flag says
        unit.finish(head, 1, CallState.COMPLETED, '{"result":{}}')
        unit.commit()  # the default: synced
        unit.reserve(head, 2, NewCall("send_email", "{}", "sig-2"))
        unit.finish(head, 1, CallState.COMPLETED, '{"result":{}}')
        unit.commit(relaxed=True)  # outcomes next to a PENDING row: synced
        unit.finish(head, 2, CallState.FAILED, '{"error":{}}')
        unit.commit(relaxed=True)  # outcomes alone: relaxed
        journal.execute("SELECT 1")  # a statement outside a transaction commits on its own: synced first
        assert statements[-2:] == [SYNCED, "SELECT 1"]
        unit.reserve(head, 3, NewCall("send_email", "{}", "sig-3"))
        unit.commit(relaxed=True)  # the next PENDING row: synced again
        journal.lineage("wf")  # a transaction of its own: synced
        assert _commit_levels(statements) == ["FULL", "FULL", "FULL", "NORMAL", "FULL", "FULL"]
    finally:
        journal.close()
    assert journal_states(str(tmp_path / "j.db"), "wf") == {
        1: CallState.COMPLETED,
        2: CallState.FAILED,
        3: CallState.PENDING,
    }


def test_relaxed_commits_set_the_synchronous_level_only_when_it_changes(tmp_path: Path) -> None:
    journal = open_journal(str(tmp_path / "j.db"))
    assert isinstance(journal, SqliteJournal)
    try:
        head = journal.lineage("wf").head
        statements = _traced(journal)
        unit = journal.unit()
        for seq in range(1, 11):
            unit.reserve(head, seq, NewCall("send_email", "{}", f"sig-{seq}"))
        unit.commit(relaxed=True)
        for seq in range(1, 11):  # ten outcomes, each committed alone: one level change, not two per commit
            unit.finish(head, seq, CallState.COMPLETED, '{"result":{}}')
            unit.commit(relaxed=True)
        assert _commit_levels(statements) == ["FULL"] + ["NORMAL"] * 10
        assert statements.count(RELAXED) + statements.count(SYNCED) == 1

        del statements[:]
        for seq in range(11, 16):  # a relaxed proxy's calls one by one: a level change per commit, at most
            unit.reserve(head, seq, NewCall("send_email", "{}", f"sig-{seq}"))
            unit.commit(relaxed=True)
            unit.finish(head, seq, CallState.COMPLETED, '{"result":{}}')
            unit.commit(relaxed=True)
        assert _commit_levels(statements) == ["FULL", "NORMAL"] * 5
        assert statements.count(RELAXED) + statements.count(SYNCED) == 10
    finally:
        journal.close()
    assert set(journal_states(str(tmp_path / "j.db"), "wf").values()) == {CallState.COMPLETED}


# point -> (row state after the crash, what a fresh proxy answers the same call)
POINTS = {
    "after_pending_commit": (CallState.PENDING, "in_doubt"),
    "after_complete_commit": (CallState.COMPLETED, "replay"),
}


@pytest.mark.parametrize("point", POINTS)
def test_a_relaxed_proxy_killed_at_a_commit_point_never_runs_the_call_twice(tmp_path: Path, point: str) -> None:
    journal = str(tmp_path / "relaxed.db")
    workflow = default_workflow_id(journal)
    effects = tmp_path / "effects.jsonl"
    args = {"to": "crash@example.com", "subject": point}
    state, answer = POINTS[point]
    with effects_proxy(journal, tmp_path, "--relaxed-completions", trigger=point) as doomed:
        doomed.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": args, "_meta": {"checkpoint_seq": 1}},
            }
        )
        assert doomed.wait() == -9
    assert journal_states(journal, workflow) == {1: state}
    runs = done_count(effects)
    assert runs == (1 if state is CallState.COMPLETED else 0)

    with effects_proxy(journal, tmp_path, "--relaxed-completions") as fresh:
        reply = fresh.call("send_email", args, seq=1)
        fresh.close()
    assert done_count(effects) == runs  # never re-run
    if answer == "replay":
        assert reply["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    else:
        assert reply["error"]["code"] == IN_DOUBT


@pytest.mark.parametrize(
    "journal_args", [(), ("--journal", "postgresql://user@localhost/db")], ids=["no journal", "postgresql"]
)
def test_relaxed_completions_need_an_sqlite_journal(journal_args: tuple[str, ...]) -> None:
    done = subprocess.run(
        checkpoint_argv("--upstream-cmd", "true", *journal_args, "--relaxed-completions"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--relaxed-completions needs an SQLite --journal" in done.stderr
