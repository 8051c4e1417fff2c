"""Schema versions: a journal written by an older Checkpoint is migrated in place and keeps every call."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import open_journal, postgres, session_starts
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.chain import start_chains
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sqlite import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION, SqliteJournal
from checkpoint_mcp.refusals import (
    ERROR_CODES,
    FAILED_BY_OPERATOR,
    IN_DOUBT,
    JOURNAL_WRITE_FAILED,
    REPEAT_REFUSED,
    UPSTREAM_REFUSED,
    CallRefused,
    JournalWriteFailed,
    UpstreamRefused,
)
from checkpoint_mcp.signature import call_signature
from ledger import verified

from support import ProxyProcess, checkpoint_argv, done_count, journal_calls, server_cmd


def write_v1_journal(path: Path, workflow: str) -> None:
    """A journal exactly as schema version 1 left it, with one completed call."""
    con = sqlite3.connect(path)
    for statement in MIGRATIONS[1]:
        con.execute(statement)
    con.execute(
        "INSERT INTO calls VALUES (?, 1, 'send_email', '{\"to\":\"a\"}', ?, 'COMPLETED', ?, ?, ?)",
        (
            workflow,
            # the signature the proxy computes for send_email({"to": "a"})
            __import__("checkpoint_mcp.signature", fromlist=["call_signature"]).call_signature(
                "send_email", {"to": "a"}
            ),
            '{"content":[{"type":"text","text":"sent to a (v1)"}],"isError":false}',
            "2026-01-01T00:00:00.000Z",
            "2026-01-01T00:00:01.000Z",
        ),
    )
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()


def test_a_version_1_journal_is_migrated_and_its_calls_replay(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    write_v1_journal(path, str(path))
    journal = SqliteJournal(str(path))
    try:
        version = journal.execute("PRAGMA user_version").fetchone()[0]
        [record] = journal.calls(str(path))
        [summary] = journal.workflows()
    finally:
        journal.close()
    assert version == SCHEMA_VERSION
    assert (record.seq, record.state, record.key) == (1, CallState.COMPLETED, None)
    assert summary.workflow == str(path)
    assert summary.created_at == "2026-01-01T00:00:00.000Z"
    effects = tmp_path / "effects.jsonl"
    with ProxyProcess(
        "--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(path), env={"EFFECTS_FILE": str(effects)}
    ) as p:
        reply = p.call("send_email", {"to": "a"}, seq=1)
        nxt = p.call("send_email", {"to": "b"})
        p.close()
    assert reply["result"]["content"][0]["text"] == "sent to a (v1)"
    assert nxt["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert done_count(effects) == 1


def write_v2_journal(path: Path) -> None:
    """A journal exactly as schema version 2 left it: a completed call with a key and an in-doubt one."""
    from checkpoint_mcp.signature import call_signature

    con = sqlite3.connect(path)
    for version in (1, 2):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
    con.execute(
        "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('wf', 'wf', '2026-02-01T00:00:00.000Z')"
    )
    rows = [
        (1, "COMPLETED", '{"content":[{"type":"text","text":"sent to a (v2)"}],"isError":false}', "k-a", "a"),
        (2, "PENDING", None, None, "b"),
    ]
    for seq, state, outcome, key, to in rows:
        con.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at,"
            " idempotency_key) VALUES ('wf', ?, 'send_email', ?, ?, ?, ?, '2026-02-01T00:00:00.000Z', NULL, ?)",
            (seq, f'{{"to":"{to}"}}', call_signature("send_email", {"to": to}), state, outcome, key),
        )
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()


def test_a_version_2_journal_gains_the_replica_columns_and_keeps_its_calls_and_doubts(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    write_v2_journal(path)
    journal = SqliteJournal(str(path))
    try:
        version = journal.execute("PRAGMA user_version").fetchone()[0]
        columns = {row[1] for row in journal.execute("PRAGMA table_info(calls)").fetchall()}
        tables = {row[0] for row in journal.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
        records = journal.calls("wf")
    finally:
        journal.close()
    assert version == SCHEMA_VERSION
    assert "replica_id" in columns
    assert "replicas" in tables
    assert [(r.seq, r.state, r.key, r.replica) for r in records] == [
        (1, CallState.COMPLETED, "k-a", None),
        (2, CallState.PENDING, None, None),
    ]
    effects = tmp_path / "effects.jsonl"
    with ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        str(path),
        "--workflow-id",
        "wf",
        env={"EFFECTS_FILE": str(effects)},
    ) as p:
        by_key = p.request(
            "tools/call", {"name": "send_email", "arguments": {"to": "a"}, "_meta": {"checkpoint_key": "k-a"}}
        )
        in_doubt = p.call("send_email", {"to": "b"}, seq=2)
        p.close()
    assert by_key["result"]["content"][0]["text"] == "sent to a (v2)"
    assert in_doubt["error"]["code"] == IN_DOUBT
    assert done_count(effects) == 0


def write_v3_journal(path: Path) -> None:
    """A journal exactly as schema version 3 left it: the v2 journal, migrated by the v3 statements."""
    write_v2_journal(path)
    con = sqlite3.connect(path)
    for statement in MIGRATIONS[3]:
        con.execute(statement)
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()


def test_a_version_3_journal_gains_the_events_table_and_its_chain_starts_with_a_marker(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    write_v3_journal(path)
    journal = SqliteJournal(str(path))
    try:
        version = journal.execute("PRAGMA user_version").fetchone()[0]
        indexes = {row[0] for row in journal.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()}
        events = journal.execute("SELECT workflow_id, seq, kind, detail, prev_hash FROM events").fetchall()
        principals = journal.execute("SELECT workflow_id, principal FROM workflows").fetchall()
    finally:
        journal.close()
    assert version == SCHEMA_VERSION == 8
    assert "calls_by_signature" in indexes
    assert "approvals_by_call" in indexes  # v6: approval requests
    assert principals == [("wf", None)]  # v7: whose a workflow is (none: it was journaled without tokens)
    [(workflow, seq, kind, detail, prev)] = events
    assert (workflow, seq, kind, prev) == ("wf", None, "chain-start", "")
    marker = json.loads(detail)
    assert (marker["reason"], marker["from_version"]) == ("migrated", 3)
    assert {seq: row["state"] for seq, row in marker["rows"].items()} == {"1": "COMPLETED", "2": "PENDING"}


OLD_CODE = {code: row.was for code, row in ERROR_CODES.items() if row.was is not None}


def old_error(refusal: CallRefused) -> dict[str, Any]:
    """``refusal`` as a Checkpoint before the -310NN move stored it: the same error under its -320NN code."""
    return {**refusal.to_error(), "code": OLD_CODE[refusal.code]}


def test_errors_checkpoint_stored_under_old_codes_replay_under_the_new_ones_and_the_chain_verifies(
    journal: str, tmp_path: Path
) -> None:
    operator = {
        "code": OLD_CODE[FAILED_BY_OPERATOR],
        "message": "the mail bounced",
        "data": {"reason": "failed_by_operator", "by": "alice"},
    }
    stored = {
        1: operator,  # `journal resolve --failed`
        2: old_error(UpstreamRefused(status=401, reason="Unauthorized", method="tools/call")),
        3: old_error(JournalWriteFailed(workflow="wf", seq=3, tool="send_email", cause="not sent")),
        # The upstream's own errors, in the codes that moved: replayed as they came.
        4: {"code": OLD_CODE[IN_DOUBT], "message": "busy", "data": {"reason": "busy"}},
        5: {"code": OLD_CODE[FAILED_BY_OPERATOR], "message": "no data"},
    }
    texts = {seq: json.dumps(error, separators=(",", ":")) for seq, error in stored.items()}
    handle = open_journal(journal)
    try:
        handle.lineage("wf")
        unit = handle.unit()
        for seq in stored:
            unit.reserve(
                "wf", seq, NewCall("send_email", f'{{"to":"{seq}"}}', call_signature("send_email", {"to": str(seq)}))
            )
        unit.commit()
        handle.resolve("wf", 1, ResolveAction.FAILED, texts[1], "alice", "host-a")
        unit = handle.unit()
        for seq in (2, 3, 4, 5):
            unit.finish("wf", seq, CallState.FAILED, texts[seq])
        unit.commit()
    finally:
        handle.close()

    effects = tmp_path / "effects.jsonl"
    with ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        "--workflow-id",
        "wf",
        env={"EFFECTS_FILE": str(effects)},
    ) as p:
        replies = {seq: p.call("send_email", {"to": str(seq)}, seq=seq)["error"] for seq in stored}
        assert p.close() == 0, p.stderr
    assert replies == {
        1: {**stored[1], "code": FAILED_BY_OPERATOR},
        2: {**stored[2], "code": UPSTREAM_REFUSED},
        3: {**stored[3], "code": JOURNAL_WRITE_FAILED},
        4: stored[4],
        5: stored[5],
    }
    assert done_count(effects) == 0
    assert {row.seq: row.outcome for row in journal_calls(journal, "wf")} == texts  # the rows, as stored
    verified(journal)


def test_a_version_3_journal_with_an_operators_failure_replays_it_under_the_new_code(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    write_v3_journal(path)
    operator = {"code": OLD_CODE[FAILED_BY_OPERATOR], "message": "bounced", "data": {"reason": "failed_by_operator"}}
    text = json.dumps(operator, separators=(",", ":"))
    con = sqlite3.connect(path)
    with con:  # what `journal resolve --failed` wrote before the -310NN move
        con.execute("UPDATE calls SET state = 'FAILED', outcome = ? WHERE seq = 2", (text,))
        con.execute(
            "INSERT INTO resolutions (workflow_id, seq, action, previous_state, previous_outcome, outcome, resolved_by,"
            " host, at) VALUES ('wf', 2, 'failed', 'PENDING', NULL, ?, 'alice', 'host-a', '2026-02-02T00:00:00.000Z')",
            (text,),
        )
    con.close()
    effects = tmp_path / "effects.jsonl"
    with ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        str(path),
        "--workflow-id",
        "wf",
        env={"EFFECTS_FILE": str(effects)},
    ) as p:
        failed = p.call("send_email", {"to": "b"}, seq=2)
        assert p.close() == 0, p.stderr
    assert failed["error"] == {**operator, "code": FAILED_BY_OPERATOR}
    assert done_count(effects) == 0
    verified(str(path))


def write_v4_journal(path: Path) -> None:
    """A journal exactly as schema version 4 left it: the v3 journal, migrated by the v4 statements and chained."""
    write_v3_journal(path)
    con = sqlite3.connect(path)
    for statement in MIGRATIONS[4]:
        con.execute(statement)
    start_chains(con.execute, None, 3, utc_now())
    con.execute("PRAGMA user_version = 4")
    con.commit()
    con.close()


def write_v4_postgres_journal(url: str) -> None:
    """A PostgreSQL journal exactly as schema version 4 left it, with no calls yet."""
    with psycopg.connect(url) as conn:
        for version in range(1, 5):
            for statement in postgres.MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO checkpoint_meta VALUES ('application', 'checkpoint-journal'), ('schema_version', '4')"
        )


def verify(journal: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        checkpoint_argv("journal", "verify", "--journal", journal, "--json"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def reworded_mail(journal: str, tmp_path: Path, policy: str, body: str) -> dict[str, Any]:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    with ProxyProcess(*argv, "--policy", policy, env=env) as p:
        p.initialize()
        reply = p.call("send_email", {"to": "bob", "subject": "Invoice", "body": body})
        assert p.close() == 0, p.stderr
    return reply


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_version_4_journal_gains_the_identity_column_and_its_chain_covers_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        journal = str(tmp_path / "j.db")
        write_v4_journal(Path(journal))
    else:
        journal = str(request.getfixturevalue("pg_url"))
        write_v4_postgres_journal(journal)
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nrepeat = "refuse"\nmatch = ["/to", "/subject"]\n', encoding="utf-8")
    reworded_mail(journal, tmp_path, str(policy), "Hi Bob")
    refused = reworded_mail(journal, tmp_path, str(policy), "Hello Bob, once more")
    assert refused["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    code, report = verify(journal)
    assert code == 0, report
    if backend == "sqlite":
        con = sqlite3.connect(journal)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        indexes = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        con.execute("UPDATE calls SET identity = 'edited' WHERE identity IS NOT NULL")
        con.commit()
        con.close()
        assert version == SCHEMA_VERSION == 8
        assert "calls_by_identity" in indexes
    else:
        with psycopg.connect(journal) as conn:
            meta = conn.execute("SELECT value FROM checkpoint_meta WHERE key = 'schema_version'").fetchone()
            indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'calls'")}
            conn.execute("UPDATE calls SET identity = 'edited' WHERE identity IS NOT NULL")
        assert meta == (str(SCHEMA_VERSION),)
        assert "calls_by_identity" in indexes
    code, report = verify(journal)
    assert code == 1
    assert "identity is" in json.dumps(report)  # a row whose identity was edited by hand is caught


def write_v6_journal(path: Path) -> None:
    """A journal exactly as schema version 6 left it, with one call that completed with a tool error and one that
    completed with a result, both of send_email."""
    con = sqlite3.connect(path)
    for version in range(1, 7):
        for statement in MIGRATIONS[version]:
            con.execute(statement)
    con.execute("INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('wf', 'wf', ?)", (utc_now(),))
    failed = '{"isError":true,"content":[{"type":"text","text":"SMTP 451 try again later"}]}'
    sent = '{"content":[{"type":"text","text":"sent"}]}'
    for seq, (arguments, outcome) in enumerate([('{"to":"a"}', failed), ('{"to":"b"}', sent)], start=1):
        con.execute(
            "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at)"
            " VALUES ('wf', ?, 'send_email', ?, ?, 'COMPLETED', ?, ?, ?)",
            (seq, arguments, call_signature("send_email", json.loads(arguments)), outcome, utc_now(), utc_now()),
        )
    start_chains(con.execute, None, 6, utc_now())
    con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    con.execute("PRAGMA user_version = 6")
    con.commit()
    con.close()


def test_a_version_6_journal_learns_which_results_were_tool_errors_so_a_retry_of_one_runs(tmp_path: Path) -> None:
    """Schema 7 marks a COMPLETED call whose result is a tool error (``isError: true``): such a call did not do its
    work, so under a repeat rule the same call runs again; a call that completed with a result is still refused."""
    journal = tmp_path / "j.db"
    write_v6_journal(journal)
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nrepeat = "refuse"\n', encoding="utf-8")
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(journal), "--workflow-id", "wf")
    with ProxyProcess(*argv, "--policy", str(policy), env=env) as p:
        p.initialize()
        retried = p.call("send_email", {"to": "a"})
        refused = p.call("send_email", {"to": "b"})
        assert p.close() == 0, p.stderr
    assert "result" in retried, retried
    assert refused["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    con = sqlite3.connect(journal)
    version = con.execute("PRAGMA user_version").fetchone()[0]
    marks = con.execute("SELECT seq, tool_error FROM calls ORDER BY seq").fetchall()
    tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert version == SCHEMA_VERSION == 8
    assert marks == [(1, 1), (2, 0), (3, 0)]
    assert {"metered", "session_starts"} <= tables
    code, report = verify(str(journal))
    assert code == 0, report


SUB_RULED = """
[tools.send_email]
repeat = "allow"                 # a mail to anyone else repeats
[[tools.send_email.when]]
name = "to-bob"
pointer = "/to"
regex = '^bob@'
repeat = "refuse"
"""


def write_v7_journal(journal: str, backend: str, *, session_start: bool = False) -> None:
    """A journal exactly as schema version 7 left it, with one completed send_email to bob, or (``session_start``)
    with one session start instead, recorded before starts named their client session."""
    sent = '{"content":[{"type":"text","text":"sent"}]}'
    row = ("wf", 1, "send_email", '{"to":"bob@x"}', call_signature("send_email", {"to": "bob@x"}), sent, utc_now())
    insert = (
        "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at)"
        " VALUES (?, ?, ?, ?, ?, 'COMPLETED', ?, ?, ?)"
    )
    start = "INSERT INTO session_starts (at, source, detail) VALUES ('2026-01-01T00:00:00.000Z', 'clear', '{}')"
    if backend == "sqlite":
        con = sqlite3.connect(journal)
        for version in range(1, 8):
            for statement in MIGRATIONS[version]:
                con.execute(statement)
        if session_start:
            con.execute(start)
        else:
            con.execute("INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('wf', 'wf', ?)", (utc_now(),))
            con.execute(insert, (*row, utc_now()))
            start_chains(con.execute, None, 7, utc_now())
        con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        con.execute("PRAGMA user_version = 7")
        con.commit()
        con.close()
        return
    with psycopg.connect(journal) as conn:
        for version in range(1, 8):
            for statement in postgres.MIGRATIONS[version]:
                conn.execute(statement)
        conn.execute(
            "INSERT INTO checkpoint_meta VALUES ('application', 'checkpoint-journal'), ('schema_version', '7')"
        )
        if session_start:
            conn.execute(start)
            return
        conn.execute("INSERT INTO workflows (workflow_id, root_id, created_at) VALUES ('wf', 'wf', %s)", (utc_now(),))
        conn.execute(insert.replace("?", "%s"), (*row, utc_now()))
        start_chains(lambda sql, params=(): conn.execute(sql.replace("?", "%s"), params), None, 7, utc_now())


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_version_7_journal_gains_the_rule_column_and_records_which_sub_rule_decided_each_call(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    journal = str(tmp_path / "j.db") if backend == "sqlite" else str(request.getfixturevalue("pg_url"))
    write_v7_journal(journal, backend)
    policy = tmp_path / "policy.toml"
    policy.write_text(SUB_RULED, encoding="utf-8")
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    replies = []
    for to in ("alice@x", "alice@x", "bob@y", "bob@x"):  # each from a fresh proxy: a new session
        with ProxyProcess(*argv, "--policy", str(policy), env=env) as p:
            p.initialize()
            replies.append(p.call("send_email", {"to": to}))
            assert p.close() == 0, p.stderr
    assert ["result" in reply for reply in replies] == [True, True, True, False]
    assert replies[3]["error"]["code"] == REPEAT_REFUSED, "bob's mail of before the upgrade is caught"
    assert replies[3]["error"]["data"]["rule"] == "tools.send_email.when.to-bob"
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 3
    rows = [(c.seq, c.rule, c.repeat_rule) for c in journal_calls(journal, "wf")]
    assert rows == [
        (1, None, None),  # journaled before the upgrade: no rule recorded
        (2, "tools.send_email", "allow"),
        (3, "tools.send_email", "allow"),
        (4, "tools.send_email.when.to-bob", "refuse"),
    ]
    if backend == "postgres":
        with psycopg.connect(journal) as conn:
            meta = conn.execute("SELECT value FROM checkpoint_meta WHERE key = 'schema_version'").fetchone()
        assert meta == (str(SCHEMA_VERSION),)
    shown = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", journal, "wf", "--json"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert [call["rule"] for call in json.loads(shown.stdout)["calls"]] == [row[1] for row in rows]
    code, report = verify(journal)
    assert code == 0, report


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_version_7_journal_learns_which_client_session_a_session_start_came_from(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Schema 8 (issue 42) names, with each session start, the client processes its hook ran under: a start marks
    only that client session. A start recorded before (no client named) still marks every session, as it did, but
    says nothing of whether a given client records its starts."""
    location = str(request.getfixturevalue("pg_url")) if backend == "postgres" else str(tmp_path / "j.db")
    write_v7_journal(location, backend, session_start=True)
    journal = open_journal(location)
    try:
        old = journal.session_starts("4242:100")
        assert old.newest == "2026-01-01T00:00:00.000Z"
        assert not old.known
        assert session_starts.record(location, "startup", {}, ("4242:100", "1:2")) is None
        mine = journal.session_starts("4242:100")
        theirs = journal.session_starts("77:3")
        assert mine.known
        assert mine.newest is not None
        assert mine.newest > "2026-01-01T00:00:00.000Z"
        assert not theirs.known  # another session's start: not its
        assert theirs.newest == "2026-01-01T00:00:00.000Z"
        assert journal.session_starts(None).newest == mine.newest  # a session of no known client: every start
    finally:
        journal.close()
    if backend == "sqlite":
        con = sqlite3.connect(location)
        version = con.execute("PRAGMA user_version").fetchone()[0]
        rows = con.execute("SELECT source, clients FROM session_starts ORDER BY id").fetchall()
        con.close()
    else:
        with psycopg.connect(location) as conn:
            version = int(conn.execute("SELECT value FROM checkpoint_meta WHERE key = 'schema_version'").fetchone()[0])
            rows = conn.execute("SELECT source, clients FROM session_starts ORDER BY id").fetchall()
    assert version == SCHEMA_VERSION == 8
    assert [tuple(row) for row in rows] == [("clear", None), ("startup", " 4242:100 1:2 ")]
