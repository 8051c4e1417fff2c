"""`checkpoint serve` hands a commit that would wait to its committer thread: it never stops the gateway.

The journal's write lock is held by another connection (as a slow disk or a busy database would hold a commit);
the journaled call waits for its PENDING row, unsent, while the gateway keeps answering other workflows; once the
lock is released the call runs once and is journaled.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import sqlite3
import time
from pathlib import Path

from checkpoint_mcp.journal.records import CallState
from gatewayproc import MODERN, effects_gateway, modern_call, request

from support import DEFAULT_TIMEOUT, done_count, journal_states

HELD_SECONDS = 3.0  # the lock is held this long; SQLite's busy timeout (5 s) outlasts it


def tools_list(port: int, workflow: str) -> float:
    """Seconds a tools/list on ``workflow`` took."""
    started = time.monotonic()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    body["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    reply = request(port, "POST", f"/w/{workflow}/mcp", body, MODERN)
    assert reply.status == 200, reply.body
    assert "tools" in reply.message()["result"]
    return time.monotonic() - started


def test_a_commit_waiting_for_the_journal_lock_does_not_stop_the_gateway(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        port = gateway.port
        first = request(port, "POST", "/w/a/mcp", modern_call(1, "send_email", {"to": "ann"}), MODERN)
        assert first.status == 200
        assert "result" in first.message()
        tools_list(port, "b")  # the second workflow's upstream is running before the lock is taken
        blocker = sqlite3.connect(journal, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the journal's write lock, held by someone else
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                call = modern_call(2, "send_email", {"to": "bob"})
                waiting = pool.submit(request, port, "POST", "/w/a/mcp", call, MODERN, DEFAULT_TIMEOUT)
                time.sleep(0.5)
                # The call's PENDING row cannot be committed, so the upstream has not seen it...
                assert not waiting.done()
                assert done_count(effects) == 1
                # ...and yet the gateway answers another workflow at once.
                assert tools_list(port, "b") < HELD_SECONDS / 2
                assert not waiting.done()
                time.sleep(max(0.0, HELD_SECONDS - 0.5 - 0.1))
                blocker.execute("ROLLBACK")
                answer = waiting.result(timeout=DEFAULT_TIMEOUT)
        finally:
            blocker.close()
        assert answer.status == 200, answer.body
        assert "result" in answer.message(), answer.body
    assert done_count(effects) == 2
    assert journal_states(journal, "a") == {1: CallState.COMPLETED, 2: CallState.COMPLETED}


def test_a_gateway_killed_while_its_commit_waits_sent_nothing_and_the_retry_runs_once(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    call = modern_call(1, "send_email", {"to": "ann"}, checkpoint_key="mail-ann")
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        port = gateway.port
        tools_list(port, "a")
        blocker = sqlite3.connect(journal, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(request, port, "POST", "/w/a/mcp", call, MODERN, DEFAULT_TIMEOUT)
                time.sleep(0.5)  # the call's PENDING row waits in the committer for the lock
                assert not waiting.done()
                gateway.proc.kill()
                assert gateway.proc.wait(timeout=DEFAULT_TIMEOUT) == -9
                with contextlib.suppress(http.client.HTTPException, OSError):
                    waiting.result(timeout=DEFAULT_TIMEOUT)  # its connection died with the gateway
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert done_count(effects) == 0  # the upstream never saw the call
    assert journal_states(journal, "a") == {}  # and no row was committed for it
    with effects_gateway(tmp_path, "--journal", journal) as gateway:
        retried = request(gateway.port, "POST", "/w/a/mcp", call, MODERN)
        assert retried.status == 200, retried.body
        again = request(gateway.port, "POST", "/w/a/mcp", call, MODERN)
        assert again.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(effects) == 1
    assert list(journal_states(journal, "a").values()) == [CallState.COMPLETED]
