"""Repeats within one unbroken session run; repeats across a loss of memory are caught (issue 36), through real
proxies on SQLite and PostgreSQL.

Under ``within_session = "run"`` the agent's own repeat of a call its session was answered runs (the second
click); the same call from a new proxy (a new session), after the session-start hook recorded a clear or a
compaction, or whose original answer the client gave up on (it cancelled), is caught by the repeat rule. A call
whose result was a tool error is no repeat at all."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from checkpoint_mcp.refusals import REPEAT_REFUSED

from support import ProxyProcess, done_count, read_effects, server_cmd, session_start, wait_until

SEND = ("send_email", {"to": "bob@example.com", "subject": "Your invoice"})
IN_SESSION = '[tools.send_email]\nrepeat = "refuse"\nwithin_session = "run"\n[tools.slow]\nrepeat = "refuse"\nwithin_session = "run"\n'


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def proxy(location: str, tmp_path: Path, policy: str) -> ProxyProcess:
    path = tmp_path / "policy.toml"
    path.write_text(policy, encoding="utf-8")
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        location,
        "--workflow-id",
        "wf",
        "--policy",
        str(path),
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def test_a_repeat_within_one_session_runs_and_the_same_call_from_a_new_session_is_refused(
    location: str, tmp_path: Path
) -> None:
    with proxy(location, tmp_path, IN_SESSION) as p:
        p.initialize()
        session_start(location, tmp_path, "startup")  # the client's hook: it says where its sessions begin
        first, second = p.call(*SEND), p.call(*SEND)
        assert p.close() == 0, p.stderr
    with proxy(location, tmp_path, IN_SESSION) as p:
        p.initialize()
        resumed = p.call(*SEND)
        assert p.close() == 0, p.stderr
    assert "result" in first
    assert "result" in second
    assert resumed["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def test_where_the_client_never_says_where_its_sessions_begin_a_repeat_within_the_proxy_is_asked_once_and_runs_sent_again(
    location: str, tmp_path: Path
) -> None:
    """Claude Desktop runs no hook, and shares one proxy with every chat: the proxy cannot tell this chat's repeat
    from the next chat's. It asks: the repeat is answered once with what ran, when and its result, and runs when
    sent again; never silently run, never blocked."""
    with proxy(location, tmp_path, IN_SESSION) as p:
        p.initialize()
        first, asked, confirmed = p.call(*SEND), p.call(*SEND), p.call(*SEND)
        assert p.close() == 0, p.stderr
    assert "result" in first
    error = asked["error"]
    assert error["code"] == REPEAT_REFUSED
    assert error["data"]["reason"] == "confirm", error
    assert error["data"]["session"] == "unknown", error
    message = error["message"]
    assert message.startswith("repeat not run yet: send_email already ran"), message
    assert "returned: sent to bob@example.com" in message
    assert "does not say where its sessions begin" in message
    assert "send this call again within 10m: it will then run" in message
    assert "result" in confirmed
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def test_without_within_session_a_table_keeps_its_meaning_and_refuses_the_repeat_in_the_same_session(
    location: str, tmp_path: Path
) -> None:
    with proxy(location, tmp_path, '[tools.send_email]\nrepeat = "refuse"\n') as p:
        p.initialize()
        first, second = p.call(*SEND), p.call(*SEND)
        assert p.close() == 0, p.stderr
    assert "result" in first
    assert second["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1


@pytest.mark.parametrize("source", ["clear", "compact"])
def test_a_repeat_after_a_clear_or_a_compaction_is_caught_though_the_proxy_lives_on(
    location: str, tmp_path: Path, source: str
) -> None:
    with proxy(location, tmp_path, IN_SESSION) as p:
        p.initialize()
        first = p.call(*SEND)
        time.sleep(0.01)  # the journal's clock counts milliseconds: the mark comes after the call
        session_start(location, tmp_path, source)
        again = p.call(*SEND)
        assert p.close() == 0, p.stderr
    assert "result" in first
    assert again["error"]["code"] == REPEAT_REFUSED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1


def test_a_call_the_client_cancelled_is_caught_when_sent_again_before_or_after_its_answer(
    location: str, tmp_path: Path
) -> None:
    """A client that times out cancels (the MCP SDKs send notifications/cancelled) and may send the call again:
    its answer never reached the agent, so the same call again is the same call, and runs once."""
    effects = tmp_path / "effects.jsonl"
    with proxy(location, tmp_path, IN_SESSION) as p:
        p.initialize()
        slow = {"name": "slow", "arguments": {"seconds": 0.5, "label": "a"}}
        p.send({"jsonrpc": "2.0", "id": "timed-out", "method": "tools/call", "params": slow})
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the call to start")
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "timed-out"}})
        p.response("timed-out")  # the test upstream answers anyway; the client had given up on it
        before = p.call("slow", {"seconds": 0.5, "label": "a"})
        answered = p.call(*SEND)
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": answered["id"]}})
        after = p.call(*SEND)
        assert p.close() == 0, p.stderr
    assert before["error"]["code"] == REPEAT_REFUSED
    assert "result" in answered
    assert after["error"]["code"] == REPEAT_REFUSED
    assert done_count(effects, "slow") == 1
    assert done_count(effects, "send_email") == 1


def test_a_call_whose_result_was_a_tool_error_is_no_repeat_and_runs_again(location: str, tmp_path: Path) -> None:
    policy = '[tools.tool_error]\nrepeat = "refuse"\n[tools.send_email]\nrepeat = "refuse"\n'
    with proxy(location, tmp_path, policy) as p:
        p.initialize()
        failed = p.call("tool_error", {"reason": "SMTP 451 try again later: nothing was sent"})
        assert p.close() == 0, p.stderr
    with proxy(location, tmp_path, policy) as p:  # a new session, within the window
        p.initialize()
        retried = p.call("tool_error", {"reason": "SMTP 451 try again later: nothing was sent"})
        assert p.close() == 0, p.stderr
    assert failed["result"]["isError"] is True
    assert retried["result"]["isError"] is True  # it ran again: this test server always reports the error
    assert done_count(tmp_path / "effects.jsonl", "tool_error") == 2
