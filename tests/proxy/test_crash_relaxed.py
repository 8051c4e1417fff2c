"""`--relaxed-completions`: outcomes committed without a sync, PENDING rows still synced before every call.

The trade is explicit (a flag, off by default): an outcome survives a crash of the proxy process, which these tests
prove by SIGKILL, but not a power loss, which would leave the call PENDING (in doubt, never re-run). What SQLite
was asked to do is read from SQLite itself (its statement trace), so the default's durability is checked too.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.errors import IN_DOUBT
from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.journal.base import CallState
from checkpoint_mcp.journal.sqlite import SqliteJournal

from support import checkpoint_argv, done_count, effects_proxy, journal_states

RELAXED = "PRAGMA synchronous=NORMAL"


def _traced(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The statements of every SQLite connection opened from now on, one list per connection, in order."""
    connections: list[list[str]] = []
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        con = connect(*args, **kwargs)
        connections.append([])
        con.set_trace_callback(connections[-1].append)
        return con

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    return connections


def _commits(statements: list[str]) -> int:
    return statements.count("COMMIT")


def test_only_a_commit_of_outcomes_alone_is_relaxed_and_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connections = _traced(monkeypatch)
    journal = open_journal(str(tmp_path / "j.db"))
    assert isinstance(journal, SqliteJournal)
    try:
        head = journal.lineage("wf").head
        [main] = connections
        assert "PRAGMA synchronous=FULL" in main

        unit = journal.unit()
        unit.reserve(head, 1, "send_email", "{}", "sig-1")
        unit.commit(relaxed=True)  # a PENDING row: synced whatever the flag says
        unit.finish(head, 1, CallState.COMPLETED, '{"result":{}}')
        unit.commit()  # the default: synced
        unit.reserve(head, 2, "send_email", "{}", "sig-2")
        unit.finish(head, 1, CallState.COMPLETED, '{"result":{}}')
        unit.commit(relaxed=True)  # outcomes next to a PENDING row: synced
        assert len(connections) == 1
        commits = _commits(main)

        unit.finish(head, 2, CallState.FAILED, '{"error":{}}')
        unit.commit(relaxed=True)  # outcomes alone: on the relaxed connection, never synced
        [_, relaxed] = connections
        assert relaxed[0] == RELAXED
        assert _commits(relaxed) == 1
        assert [sql for sql in relaxed if sql.startswith("PRAGMA synchronous")] == [RELAXED]
        assert RELAXED not in main
        assert _commits(main) == commits  # every synced commit stays on the main connection
    finally:
        journal.close()
    assert journal_states(str(tmp_path / "j.db"), "wf") == {1: CallState.COMPLETED, 2: CallState.FAILED}


def test_relaxed_commits_switch_no_synchronous_level_per_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    connections = _traced(monkeypatch)
    journal = open_journal(str(tmp_path / "j.db"))
    assert isinstance(journal, SqliteJournal)
    try:
        head = journal.lineage("wf").head
        unit = journal.unit()
        for seq in range(1, 11):  # what a relaxed proxy commits per call: a synced PENDING, a relaxed outcome
            unit.reserve(head, seq, "send_email", "{}", f"sig-{seq}")
            unit.commit(relaxed=True)
            unit.finish(head, seq, CallState.COMPLETED, '{"result":{}}')
            unit.commit(relaxed=True)
        statements = [sql for con in connections for sql in con]
        assert sum(_commits(con) for con in connections) >= 20
        # One per connection when it opens: FULL on the main one, NORMAL on the relaxed one; none per commit.
        assert [sql for sql in statements if sql.startswith("PRAGMA synchronous")] == [
            "PRAGMA synchronous=FULL",
            RELAXED,
        ]
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
