"""`checkpoint journal approvals` and `checkpoint journal approve` as real commands, against the journal a real
proxy wrote: a person lists the waiting request, decides it, and the agent's same call then runs once (or not)."""

from __future__ import annotations

import getpass
import json
import os
import pwd
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal, operations
from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from support import ProxyProcess, checkpoint_argv, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
POLICY = '[tools.send_email]\napprove = "operator"\n'


def policy(tmp_path: Path, text: str = POLICY) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def agent_call(journal: str, tmp_path: Path, *extra: str, arguments: dict[str, Any] = MAIL) -> dict[str, Any]:
    """One tools/call of send_email from a fresh proxy under the approval policy."""
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    rules = policy(tmp_path)
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--policy", rules, *extra]
    with ProxyProcess(*argv, env=env) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", arguments)
        assert proxy.close() == 0, proxy.stderr
    return reply


def cli(journal: str, command: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        checkpoint_argv("journal", command, "--journal", journal, *args),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def listed(journal: str, *args: str) -> list[dict[str, Any]]:
    found = json.loads(cli(journal, "approvals", "--json", *args).stdout)
    assert isinstance(found, list)
    return found


def sent(tmp_path: Path) -> int:
    return done_count(tmp_path / "effects.jsonl", "send_email")


def test_a_person_lists_the_waiting_call_approves_it_and_the_same_call_runs_once(journal: str, tmp_path: Path) -> None:
    asked = agent_call(journal, tmp_path)
    assert asked["error"]["code"] == APPROVAL_REQUIRED
    number = asked["error"]["data"]["approval"]
    (waiting,) = listed(journal)
    assert waiting["id"] == number
    assert waiting["state"] == "pending"
    assert waiting["tool"] == "send_email"
    assert waiting["arguments"] == MAIL  # the JSON value, not a text
    assert waiting["requested_by"]["pid"] > 0
    assert waiting["requested_at"]
    assert waiting["decided_by"] is None
    table = cli(journal, "approvals").stdout
    assert table.splitlines()[0].split()[:4] == ["ID", "STATE", "WORKFLOW", "TOOL"]
    assert f"#{number}  pending" in table
    assert '"to":"bob@example.com"' in table

    approved = cli(journal, "approve", str(number)).stdout
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    assert f"approval #{number} granted by {who}" in approved
    assert "The same call, sent again within 1h" in approved
    assert "runs once" in approved
    assert sent(tmp_path) == 0  # approving runs nothing: the agent's call does

    assert "result" in agent_call(journal, tmp_path)
    assert sent(tmp_path) == 1
    (used,) = listed(journal)
    assert (used["state"], used["used_seq"], used["decided_by"]) == ("used", 1, who)
    assert f"#{number}  used" in cli(journal, "approvals").stdout
    again = cli(journal, "approve", str(number), ok=False)
    assert again.returncode == 1
    assert f"approval #{number} is used, not pending" in again.stderr


def test_a_denial_with_its_reason_reaches_the_agent_and_cannot_be_decided_again(journal: str, tmp_path: Path) -> None:
    number = agent_call(journal, tmp_path)["error"]["data"]["approval"]
    denied = cli(journal, "approve", str(number), "--deny", "--reason", "wrong customer").stdout
    assert f"approval #{number} denied by" in denied
    assert "(wrong customer)" in denied
    assert "is refused as denied" in denied
    refused = agent_call(journal, tmp_path)
    assert refused["error"]["data"]["reason"] == "approval_denied"
    assert "wrong customer" in refused["error"]["message"]
    assert sent(tmp_path) == 0
    (row,) = listed(journal)
    assert (row["state"], row["reason"]) == ("denied", "wrong customer")
    regrant = cli(journal, "approve", str(number), ok=False)
    assert regrant.returncode == 1
    assert f"approval #{number} is denied, not pending" in regrant.stderr
    assert sent(tmp_path) == 0


def test_an_unknown_id_and_an_expired_grant_are_refused_with_a_clear_error(journal: str, tmp_path: Path) -> None:
    number = agent_call(journal, tmp_path)["error"]["data"]["approval"]
    missing = cli(journal, "approve", "99", ok=False)
    assert missing.returncode == 1
    assert "no approval request #99 in this journal" in missing.stderr
    assert cli(journal, "approve", "0", ok=False).returncode == 2  # not an id at all: click's usage error
    cli(journal, "approve", str(number))
    aged = open_journal(journal)
    try:  # the grant's hour passed, unused (no proxy has recorded it as expired yet)
        with aged.transaction():
            aged.execute("UPDATE approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (number,))
    finally:
        aged.close()
    (row,) = listed(journal)
    assert (row["state"], row["stored_state"]) == ("expired", "granted")
    late = cli(journal, "approve", str(number), ok=False)
    assert late.returncode == 1
    assert f"approval #{number} is expired, not pending" in late.stderr


def test_the_list_keeps_workflows_apart_and_shows_redacted_arguments_as_the_marker(
    journal: str, tmp_path: Path
) -> None:
    agent_call(journal, tmp_path, "--workflow-id", "billing")
    other = {"to": "eve@example.com", "subject": "Hi"}
    agent_call(journal, tmp_path, "--workflow-id", "support", "--redact-args-in-journal", arguments=other)
    both = listed(journal)
    assert [row["workflow"] for row in both] == ["support", "billing"]  # newest first
    (support,) = listed(journal, "support")
    assert support["arguments"] == "«redacted»"
    assert support["redacted"] is True
    assert "eve@example.com" not in cli(journal, "approvals").stdout
    (billing,) = listed(journal, "billing")
    assert billing["arguments"] == MAIL
    assert listed(journal, "nobody") == []


def test_an_operator_whose_uid_has_no_name_approves_and_is_recorded_by_uid(
    journal: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's arbitrary uid (OpenShift assigns one) has no passwd entry and no USER: the decision is
    recorded under ``uid N`` instead of failing. (The process itself keeps its uid: another uid could not run this
    machine's Python, which lives under /root; the uid the system is asked about is one it has no name for.)"""
    number = agent_call(journal, tmp_path)["error"]["data"]["approval"]
    nameless = 54321
    with pytest.raises(KeyError):
        pwd.getpwuid(nameless)
    for variable in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(os, "getuid", lambda: nameless)
    store = open_journal(journal)
    try:
        decided = operations.decide_approval(store, number, True)
    finally:
        store.close()
    assert decided.decided_by == f"uid {nameless}@{socket.gethostname()}"
    (row,) = listed(journal)
    assert row["decided_by"] == f"uid {nameless}@{socket.gethostname()}"
