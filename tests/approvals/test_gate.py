"""Approval gates (`approve = "operator"`), through real proxies on SQLite and PostgreSQL: a call waits for a
person's approval of its exact arguments, runs once on it from a fresh proxy, and never twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED, REPEAT_REFUSED

from support import ProxyProcess, decide_request, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
POLICY = '[tools.send_email]\napprove = "operator"\n'


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends in every run: an approval must hold wherever the journal lives."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def policy(tmp_path: Path, text: str = POLICY) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def fresh_call(location: str, tmp_path: Path, arguments: dict[str, Any], *extra: str) -> dict[str, Any]:
    """One tools/call of send_email from a new proxy process."""
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, *extra]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", arguments)
        assert proxy.close() == 0, proxy.stderr
    return reply


def store(location: str) -> Any:
    journal = open_journal(location)
    return journal


def decide(location: str, approval_id: int, grant: bool = True, reason: str | None = None) -> None:
    decide_request(location, approval_id, grant, reason)


def sent(tmp_path: Path) -> int:
    return done_count(tmp_path / "effects.jsonl", "send_email")


def test_a_call_waits_for_approval_then_runs_once_from_a_fresh_proxy(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path)
    asked = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert asked["error"]["code"] == APPROVAL_REQUIRED
    data = asked["error"]["data"]
    assert data["reason"] == "awaiting_approval"
    assert data["tool"] == "send_email"
    approval_id = data["approval"]
    message = asked["error"]["message"]
    assert f"Approval #{approval_id} is waiting" in message
    shown = store(location)
    where = shown.location  # a PostgreSQL URL without its password
    shown.close()
    assert f"checkpoint journal approve --journal {where} {approval_id}" in message
    assert "send the same call again" in message
    assert sent(tmp_path) == 0
    # Sent again before anyone decided: the same request, not a second one.
    again = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert again["error"]["data"]["approval"] == approval_id
    decide(location, approval_id)
    ran = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert "result" in ran
    assert sent(tmp_path) == 1
    # Used: the same call again does not run on it; it asks anew.
    after = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert after["error"]["code"] == APPROVAL_REQUIRED
    assert after["error"]["data"]["approval"] != approval_id
    assert sent(tmp_path) == 1
    journal = store(location)
    try:
        states = {a.id: a.state for a in journal.approvals.approvals()}
        assert states[approval_id] is ApprovalState.USED
        used = next(a for a in journal.approvals.approvals() if a.id == approval_id)
        assert used.used_seq == 1
        assert used.decided_by == "alice"
        links = journal.links(default_workflow_id(location))
        # The refused repeat did not run: no "ran again" record, only the approval's own events.
        assert [link.kind for link in links if link.kind == "repeat"] == []
        kinds = [link.detail for link in links if link.kind == "approval"]
        assert [k for k in kinds if f'"id":{approval_id},' in k and '"action":"used"' in k]
    finally:
        journal.close()


def test_other_arguments_need_their_own_approval(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path)
    first = fresh_call(location, tmp_path, MAIL, "--policy", rules)["error"]["data"]["approval"]
    decide(location, first)
    other = fresh_call(location, tmp_path, {**MAIL, "to": "eve@example.com"}, "--policy", rules)
    assert other["error"]["code"] == APPROVAL_REQUIRED
    assert other["error"]["data"]["approval"] != first
    assert sent(tmp_path) == 0
    assert "result" in fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert sent(tmp_path) == 1


def test_a_denied_call_is_refused_as_denied_and_never_runs(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path)
    approval_id = fresh_call(location, tmp_path, MAIL, "--policy", rules)["error"]["data"]["approval"]
    decide(location, approval_id, grant=False, reason="wrong customer")
    denied = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert denied["error"]["data"]["reason"] == "approval_denied"
    assert "denied by alice: wrong customer" in denied["error"]["message"]
    assert sent(tmp_path) == 0


def test_an_expired_approval_is_refused_with_a_fresh_request(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path, POLICY + 'approval_expires = "1s"\n')
    approval_id = fresh_call(location, tmp_path, MAIL, "--policy", rules)["error"]["data"]["approval"]
    decide(location, approval_id)
    journal = store(location)
    try:  # age the grant instead of sleeping
        with journal.transaction():
            aged = "UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?"
            journal.execute(aged, (approval_id,))
    finally:
        journal.close()
    expired = fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert expired["error"]["code"] == APPROVAL_REQUIRED
    assert expired["error"]["data"]["approval"] != approval_id
    assert sent(tmp_path) == 0
    journal = store(location)
    try:
        assert {a.id: a.state for a in journal.approvals.approvals()}[approval_id] is ApprovalState.EXPIRED
    finally:
        journal.close()


def test_a_call_the_agent_marks_approved_is_still_refused(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path)
    claims = {**MAIL, "approved": True, "_meta": {"checkpoint/approval": 1}}
    reply = fresh_call(location, tmp_path, claims, "--policy", rules)
    assert reply["error"]["code"] == APPROVAL_REQUIRED
    assert sent(tmp_path) == 0


def test_after_an_approved_call_a_repeat_rule_still_applies(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path, POLICY + 'repeat = "refuse"\n')
    approval_id = fresh_call(location, tmp_path, MAIL, "--policy", rules)["error"]["data"]["approval"]
    decide(location, approval_id)
    assert "result" in fresh_call(location, tmp_path, MAIL, "--policy", rules)
    assert fresh_call(location, tmp_path, MAIL, "--policy", rules)["error"]["code"] == REPEAT_REFUSED
    assert sent(tmp_path) == 1


def test_a_refused_call_takes_no_sequence_in_a_long_lived_proxy(location: str, tmp_path: Path) -> None:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, "--policy", policy(tmp_path)]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        first = proxy.call("send_email", MAIL)["error"]["data"]["approval"]
        assert proxy.call("send_email", MAIL)["error"]["data"]["approval"] == first
        decide(location, first)
        ran = proxy.call("send_email", MAIL)
        assert proxy.close() == 0, proxy.stderr
    assert ran["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert sent(tmp_path) == 1
