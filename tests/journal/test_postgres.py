"""The PostgreSQL journal against a real server: schema, credentials, a fleet, restarts, outages, lost ownership.

These always run on PostgreSQL (the server is started by the suite). The backend-generic journal and proxy
tests also run on it with ``CHECKPOINT_TEST_JOURNAL=postgres``.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from checkpoint_mcp.errors import JournalCorrupt, JournalUnavailable, JournalVersionError
from checkpoint_mcp.journal import default_workflow_id, open_journal, without_password
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresJournal
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, JOURNAL_WRITE_FAILED
from checkpoint_mcp.signature import call_signature
from pgserver import PASSWORD, PgServer

from support import (
    ProxyProcess,
    checkpoint_argv,
    done_count,
    journal_calls,
    journal_states,
    read_effects,
    server_cmd,
    wait_until,
)


def start(url: str, tmp_path: Path, *extra: str, log_level: str = "info") -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        url,
        "--log-level",
        log_level,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def test_a_postgres_url_opens_a_postgres_journal_with_the_current_schema(pg_url: str) -> None:
    short = pg_url.replace("postgresql://", "postgres://", 1)
    journal = open_journal(short)
    try:
        assert isinstance(journal, PostgresJournal)
        assert journal.location == without_password(short)
        assert PASSWORD not in journal.location
    finally:
        journal.close()
    with psycopg.connect(pg_url) as conn:
        meta = dict(conn.execute("SELECT key, value FROM checkpoint_meta").fetchall())
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert meta == {"application": "checkpoint-journal", "schema_version": str(SCHEMA_VERSION)}
    assert {"calls", "workflows", "resolutions", "owners", "checkpoint_meta"} <= tables


def test_a_version_1_postgres_journal_is_migrated_and_keeps_its_calls(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url) as conn:
        for statement in MIGRATIONS[1]:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO checkpoint_meta VALUES ('application', 'checkpoint-journal'), ('schema_version', '1')"
        )
        conn.execute(
            "INSERT INTO calls VALUES ('wf', 1, 'send_email', '{\"to\":\"a\"}', %s, 'COMPLETED', %s, %s, %s)",
            (
                call_signature("send_email", {"to": "a"}),
                '{"content":[{"type":"text","text":"sent to a (v1)"}],"isError":false}',
                "2026-01-01T00:00:00.000Z",
                "2026-01-01T00:00:01.000Z",
            ),
        )
    with start(pg_url, tmp_path, "--workflow-id", "wf") as p:
        reply = p.call("send_email", {"to": "a"}, seq=1)
        p.close()
    assert reply["result"]["content"][0]["text"] == "sent to a (v1)"
    assert done_count(tmp_path / "effects.jsonl") == 0


def test_a_postgres_journal_from_a_newer_checkpoint_is_refused_untouched(pg_url: str) -> None:
    open_journal(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE checkpoint_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalVersionError, match="schema version 99"):
        open_journal(pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT value FROM checkpoint_meta WHERE key = 'schema_version'").fetchone() == ("99",)


def test_a_database_whose_calls_table_is_not_ours_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("CREATE TABLE calls (id int)")
    with pytest.raises(JournalCorrupt, match="not a Checkpoint journal"):
        open_journal(pg_url)


def test_credentials_never_appear_in_errors(pg_server: PgServer, tmp_path: Path) -> None:
    wrong = pg_server.url().replace(PASSWORD, "WrongPassword123")
    with pytest.raises(JournalUnavailable) as refused:
        open_journal(wrong)
    assert "WrongPassword123" not in str(refused.value)
    assert "password authentication failed" in str(refused.value)
    done = subprocess.run(
        checkpoint_argv("journal", "ls", "--journal", wrong), capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 1
    assert "WrongPassword123" not in done.stderr + done.stdout
    proxy = subprocess.run(
        checkpoint_argv("--upstream-cmd", "true", "--journal", wrong, "--log-level", "debug"),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        input="",
    )
    assert proxy.returncode == 1
    assert "WrongPassword123" not in proxy.stderr
    assert "cannot connect to journal postgresql://checkpoint@127.0.0.1" in proxy.stderr


def test_a_fleet_of_8_proxies_on_8_workflows_writes_concurrently_without_lost_or_mixed_rows(
    pg_url: str, tmp_path: Path
) -> None:
    agents = [f"agent-{i}" for i in range(8)]
    proxies = [start(pg_url, tmp_path, "--workflow-id", name) for name in agents]
    calls_each = 25
    try:
        for round_ in range(calls_each):
            for name, p in zip(agents, proxies, strict=True):
                p.send(
                    {
                        "jsonrpc": "2.0",
                        "id": round_,
                        "method": "tools/call",
                        "params": {"name": "send_email", "arguments": {"to": f"{name}/{round_}"}},
                    }
                )
        for name, p in zip(agents, proxies, strict=True):
            for round_ in range(calls_each):
                reply = p.response(round_, timeout=60)
                assert reply["result"]["_meta"]["checkpoint/journal"]["workflow"] == name
            assert p.close() == 0
    finally:
        for p in proxies:
            p.__exit__(None, None, None)
    for name in agents:
        rows = journal_calls(pg_url, name)
        assert [r.seq for r in rows] == list(range(1, calls_each + 1))
        assert all(r.state is CallState.COMPLETED for r in rows)
        assert sorted(json.loads(r.arguments)["to"] for r in rows) == sorted(f"{name}/{i}" for i in range(calls_each))
        for r in rows:  # each row's outcome belongs to its own call
            assert json.loads(r.outcome)["content"][0]["text"] == f"sent to {json.loads(r.arguments)['to']}"
    assert done_count(tmp_path / "effects.jsonl") == 8 * calls_each


def test_a_database_restart_mid_run_reexecutes_nothing_and_the_proxy_carries_on(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with start(pg_url, tmp_path, log_level="debug") as p:
        before = [p.call("send_email", {"to": f"before-{i}"}) for i in range(5)]
        for i in range(3):  # three calls in flight across the restart
            p.send(
                {
                    "jsonrpc": "2.0",
                    "id": f"slow-{i}",
                    "method": "tools/call",
                    "params": {"name": "slow", "arguments": {"seconds": 2, "label": str(i)}},
                }
            )
        wait_until(lambda: sum(e["event"] == "started" for e in read_effects(effects)) == 3, what="calls in flight")
        pg_server.restart()
        across = [p.response(f"slow-{i}", timeout=60) for i in range(3)]
        after = [p.call("send_email", {"to": f"after-{i}"}, timeout=60) for i in range(5)]
        assert p.close() == 0
        stderr = p.stderr
    assert PASSWORD not in stderr
    assert "reconnected to the journal" in stderr
    for reply in [*before, *across, *after]:
        assert "result" in reply, reply
    states = journal_states(pg_url, default_workflow_id(pg_url))
    assert states == dict.fromkeys(range(1, 14), CallState.COMPLETED)
    runs = done_count(effects)
    assert runs == 13
    with start(pg_url, tmp_path) as fresh:
        replays = [fresh.call("send_email", {"to": f"before-{i}"}, seq=i + 1) for i in range(5)]
        fresh.close()
    assert all(r["result"]["_meta"]["checkpoint/journal"]["replayed"] for r in replays)
    assert done_count(effects) == runs


def test_when_the_database_stays_gone_a_new_call_is_refused_and_the_proxy_exits(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with start(pg_url, tmp_path) as p:
        p.call("send_email", {"to": "first"})
        pg_server.stop()
        try:
            refused = p.call("send_email", {"to": "during-outage"}, timeout=60)
            code = p.wait(timeout=60)
            stderr = p.stderr
        finally:
            pg_server.start()
    assert refused["error"]["code"] == JOURNAL_WRITE_FAILED
    assert "stayed unreachable" in refused["error"]["message"]
    assert code == 1
    assert "stopping: the journal" in stderr
    assert PASSWORD not in stderr
    assert [e["arguments"]["to"] for e in read_effects(effects)] == ["first"]
    assert journal_states(pg_url, default_workflow_id(pg_url)) == {1: CallState.COMPLETED}


def test_when_the_database_stays_gone_a_call_in_flight_is_answered_and_left_in_doubt(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with start(pg_url, tmp_path) as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": "inflight",
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 1}},
            }
        )
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the call in flight")
        pg_server.stop()
        try:
            # The answer arrives while the database is down: forwarded, but its row stays PENDING.
            inflight = p.response("inflight", timeout=60)
            code = p.wait(timeout=60)
            stderr = p.stderr
        finally:
            pg_server.start()
    assert inflight["result"]["content"][0]["text"] == "slow  done"
    assert code == 1
    assert "they stay in doubt" in stderr
    assert PASSWORD not in stderr
    assert journal_states(pg_url, default_workflow_id(pg_url)) == {1: CallState.PENDING}
    with start(pg_url, tmp_path) as fresh:
        again = fresh.call("slow", {"seconds": 1}, seq=1)
        fresh.close()
    assert again["error"]["code"] == IN_DOUBT
    assert done_count(effects, "slow") == 1


def test_a_proxy_that_lost_its_workflow_during_an_outage_stops(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    with start(pg_url, tmp_path) as first:
        first.call("send_email", {"to": "a"}, seq=1)  # it numbers its calls: the workflow is its alone
        pg_server.restart()  # the first proxy's session, and with it its advisory lock, is gone
        with start(pg_url, tmp_path) as second:
            second.request("ping")  # the second proxy now shares the workflow: the first cannot own it alone
            refused = first.call("send_email", {"to": "b"}, timeout=60)
            code = first.wait(timeout=60)
            assert "ownership of workflow" in first.stderr
            assert "result" in second.call("send_email", {"to": "c"})
            second.close()
    assert refused["error"]["code"] == JOURNAL_WRITE_FAILED
    assert code == 1
    sent = [e["arguments"]["to"] for e in read_effects(tmp_path / "effects.jsonl")]
    assert sent == ["a", "c"]


def test_racing_and_takeover_work_across_sessions(pg_url: str, tmp_path: Path) -> None:
    results: dict[str, Any] = {}

    def run(name: str) -> None:
        done = subprocess.run(
            checkpoint_argv(
                "--upstream-cmd", server_cmd("effects_server.py"), "--journal", pg_url, "--workflow-id", "w"
            ),
            input='{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        results[name] = done

    with start(pg_url, tmp_path, "--workflow-id", "w", "--replay-from-start") as owner:  # it owns the workflow alone
        owner.request("ping")
        threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for done in results.values():
            assert done.returncode == 1
            assert f"pid {owner.proc.pid}" in done.stderr
        owner.kill()
    with start(pg_url, tmp_path, "--workflow-id", "w") as successor:
        assert successor.request("ping", timeout=60)["result"] == {}
        successor.close()


def test_the_finish_of_a_call_is_always_planned_for_its_own_row(pg_url: str) -> None:
    """psycopg prepares a statement run five times; a generic plan made from an almost empty table's statistics
    had the finish UPDATE scan the whole workflow (by ``calls_by_signature``) for every call, ever after."""
    journal = PostgresJournal(pg_url)
    try:
        unit = journal.unit()
        for seq in range(1, 41):
            unit.reserve("wf", seq, NewCall("send", "{}", f"sig{seq}"))
        unit.commit()
        for seq in range(1, 41):  # one commit each: the statement runs often enough to be prepared
            unit.finish("wf", seq, CallState.COMPLETED, "{}")
            unit.commit()
        plans = journal._conn.execute(  # the journal's own session, where its statements are prepared
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'UPDATE calls SET state%'"
        ).fetchall()
    finally:
        journal.close()
    assert plans, "the finish statement was never prepared: this test no longer tests anything"
    assert all(generic == 0 and custom > 0 for generic, custom in plans)


def test_a_connection_killed_under_a_pipelined_write_is_told_in_one_line_of_ours(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    """psycopg logs a line of its own when a pipeline ends on a dead connection; the journal says it instead.

    Whether the next write finds the killed connection inside a pipeline or before it depends on when the kill
    lands, so the kill and the call are repeated (bounded) until one did. The proxy owns its workflow alone, so the
    commit is the first statement after the kill (a proxy sharing the workflow would step its counter first)."""
    ours = "checkpoint: WARNING: the journal's PostgreSQL connection broke during a pipelined write ("
    database = pg_url.rsplit("/", 1)[1].split("?", 1)[0]
    with (
        start(pg_url, tmp_path, "--replay-from-start") as p,
        psycopg.connect(pg_server.url(), autocommit=True) as admin,
    ):
        calls = 0
        while ours not in p.stderr and calls < 20:
            assert "result" in p.call("send_email", {"to": f"to-{calls}"}, timeout=60)
            calls += 1
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )
        assert "result" in p.call("send_email", {"to": "last"}, timeout=60)
        assert p.close() == 0
        stderr = p.stderr
    said = [text for text in stderr.splitlines() if "pipelined write" in text]
    assert said, stderr
    assert all(text.startswith(ours) for text in said)
    assert "error ignored terminating" not in stderr
    assert "psycopg" not in stderr
    assert PASSWORD not in stderr
    assert done_count(tmp_path / "effects.jsonl") == calls + 1


def test_a_password_given_as_a_url_parameter_is_shown_nowhere(pg_server: PgServer, pg_url: str, tmp_path: Path) -> None:
    """libpq takes ``?password=`` as well as ``user:PASSWORD@``: the journal's shown location, the default workflow
    id (which the pages, the brief and every refusal name) and the proxy's errors carry neither."""
    in_query = pg_url.replace(f":{PASSWORD}@", "@") + f"?password={PASSWORD}&connect_timeout=5"
    journal = open_journal(in_query)
    try:
        assert PASSWORD not in journal.location
        assert "connect_timeout=5" in journal.location
    finally:
        journal.close()
    assert PASSWORD not in default_workflow_id(in_query)
    with start(in_query, tmp_path) as p:
        reply = p.call("send_email", {"to": "ann"})
        assert p.close() == 0
    assert PASSWORD not in json.dumps(reply)
    gone = pg_server.url("no_such_database", password=False) + f"?password={PASSWORD}"
    failed = subprocess.run(
        ["checkpoint", "--journal", gone, "--upstream-cmd", "true"],
        input=b"",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert failed.returncode != 0
    assert b"no_such_database" in failed.stderr
    assert PASSWORD.encode() not in failed.stderr


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://u:pw@db.internal:5433/journal", "postgresql://u@db.internal:5433/journal"),
        ("postgresql://u:pw@[::1]:5433/journal", "postgresql://u@[::1]:5433/journal"),
        ("postgresql://u@db/j?password=pw&sslmode=require", "postgresql://u@db/j?sslmode=require"),
        ("postgresql://:pw@db/j", "postgresql://db/j"),
        ("postgresql://db/j", "postgresql://db/j"),
    ],
)
def test_a_journal_url_is_shown_without_its_password_wherever_it_was_given(given: str, shown: str) -> None:
    assert without_password(given) == shown
