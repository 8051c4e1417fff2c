"""Bad input gets a clear error and loses nothing: malformed lines, batches, reused ids, a journal that fails."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sqlite import SqliteJournal
from checkpoint_mcp.refusals import INVALID_REQUEST, JOURNAL_WRITE_FAILED, PARSE_ERROR

from support import ProxyProcess, read_effects, server_cmd


def start(tmp_path: Path, journal: str | None = None) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal or str(tmp_path / "j.db"),
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def test_a_malformed_line_gets_a_parse_error_and_the_relay_goes_on(journal: str, tmp_path: Path) -> None:
    with start(tmp_path, journal) as p:
        p.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"\n')
        error = p.recv()
        p.send_raw(b"\xff\xfe not utf-8\n")
        error2 = p.recv()
        pong = p.request("ping")
        reply = p.call("send_email", {"to": "a"})
        assert p.close() == 0
    for e in (error, error2):
        assert e["id"] is None
        assert e["error"]["code"] == PARSE_ERROR
    assert pong["result"] == {}
    assert "result" in reply


def test_a_json_value_that_is_not_a_message_is_an_invalid_request(journal: str, tmp_path: Path) -> None:
    with start(tmp_path, journal) as p:
        p.send_raw(b'"just a string"\n')
        error = p.recv()
        p.close()
    assert error["error"]["code"] == INVALID_REQUEST


def test_a_batch_holding_a_tools_call_is_refused_and_nothing_runs(journal: str, tmp_path: Path) -> None:
    with start(tmp_path, journal) as p:
        p.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_email","arguments":{}}}]\n')
        error = p.recv()
        p.close()
    assert error["error"]["code"] == INVALID_REQUEST
    assert "batch" in error["error"]["message"]
    assert read_effects(tmp_path / "effects.jsonl") == []


def test_a_tools_call_without_an_id_is_dropped_not_run(journal: str, tmp_path: Path) -> None:
    with start(tmp_path, journal) as p:
        p.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "send_email", "arguments": {}}})
        p.request("ping")  # proves the line was processed
        p.close()
    assert read_effects(tmp_path / "effects.jsonl") == []
    assert "dropped a tools/call without an id" in p.stderr


def test_a_tools_call_reusing_an_id_in_flight_is_refused(journal: str, tmp_path: Path) -> None:
    with start(tmp_path, journal) as p:
        call = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 0.5}},
        }
        p.send(call)
        p.send(call)
        refusal, answer = p.recv(), p.recv()  # the refusal is immediate; the call takes 0.5 s
        p.close()
    assert refusal["id"] == 5
    assert refusal["error"]["code"] == INVALID_REQUEST
    assert "already in flight" in refusal["error"]["message"]
    assert answer["id"] == 5
    assert answer["result"]["content"][0]["text"] == "slow  done"
    assert sum(1 for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done") == 1


def test_a_journal_write_that_fails_refuses_the_call_before_the_upstream_sees_it_sqlite_locked(tmp_path: Path) -> None:
    with start(tmp_path) as p:
        p.call("send_email", {"to": "before"})
        blocker = sqlite3.connect(tmp_path / "j.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
        try:
            refused = p.call("send_email", {"to": "while-locked"}, timeout=30)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        after = p.call("send_email", {"to": "after"})
        assert p.close() == 0
    error = refused["error"]
    assert error["code"] == JOURNAL_WRITE_FAILED
    assert error["data"]["reason"] == "journal_write_failed"
    assert "locked" in error["data"]["cause"]
    assert "result" in after
    sent = [e["arguments"]["to"] for e in read_effects(tmp_path / "effects.jsonl")]
    assert sent == ["before", "after"]
    journal = SqliteJournal(str(tmp_path / "j.db"))
    states = [(r.seq, r.state) for r in journal.calls(str(tmp_path / "j.db"))]
    journal.close()
    assert states == [(1, CallState.COMPLETED), (3, CallState.COMPLETED)]  # #2, refused, stays unused
