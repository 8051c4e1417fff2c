"""Approval gates under SIGKILL: the proxy killed at every step of an approved call's path (after the request is
written, after the approval, between using it and the upstream's answer, after the outcome) never runs the call
twice, nor without an approval. The journal (SQLite, or PostgreSQL under CHECKPOINT_TEST_JOURNAL=postgres) and the
effects server's file are read after each crash, and a fresh proxy sends the same call again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED, IN_DOUBT

from support import (
    APPROVED_CALL_CRASHES,
    ProxyProcess,
    approval_requests,
    decide_request,
    done_count,
    effects_proxy,
    journal_states,
)

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


@pytest.fixture
def rules(tmp_path: Path) -> str:
    path = tmp_path / "policy.toml"
    path.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    return str(path)


def proxy(journal: str, tmp_path: Path, rules: str, trigger: str | None = None) -> ProxyProcess:
    return effects_proxy(journal, tmp_path, "--policy", rules, trigger=trigger)


def call_once(journal: str, tmp_path: Path, rules: str) -> dict[str, Any]:
    """send_email(MAIL) from a fresh proxy, as an agent resumed after a crash sends it (no sequence hint)."""
    with proxy(journal, tmp_path, rules) as fresh:
        fresh.initialize()
        reply = fresh.call("send_email", MAIL)
        assert fresh.close() == 0, fresh.stderr
    return reply


def killed_at(journal: str, tmp_path: Path, rules: str, point: str) -> None:
    """send_email(MAIL) through a proxy armed to SIGKILL itself at ``point``: it dies, the client never hears."""
    with proxy(journal, tmp_path, rules, trigger=point) as doomed:
        doomed.initialize()
        doomed.send(
            {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "send_email", "arguments": MAIL}}
        )
        assert doomed.wait() == -9, doomed.stderr  # it SIGKILLed itself at the point
        with pytest.raises(AssertionError, match="closed its stdout"):
            doomed.recv_line(timeout=5)


def approvals(journal: str) -> dict[int, ApprovalState]:
    return {found.id: found.state for found in approval_requests(journal)}


def approve(journal: str, approval_id: int) -> None:
    decide_request(journal, approval_id)


def sent(tmp_path: Path) -> int:
    return done_count(tmp_path / "effects.jsonl", "send_email")


def test_killed_after_the_request_is_written_the_request_survives_and_is_not_doubled(
    journal: str, workflow: str, tmp_path: Path, rules: str
) -> None:
    killed_at(journal, tmp_path, rules, "after_approval_request")
    assert approvals(journal) == {1: ApprovalState.PENDING}  # durable before its refusal was sent
    assert journal_states(journal, workflow) == {}
    again = call_once(journal, tmp_path, rules)
    assert again["error"]["code"] == APPROVAL_REQUIRED
    assert again["error"]["data"]["approval"] == 1  # the same request, not a second one
    assert sent(tmp_path) == 0
    approve(journal, 1)
    assert "result" in call_once(journal, tmp_path, rules)
    assert sent(tmp_path) == 1
    assert approvals(journal) == {1: ApprovalState.USED}


def test_killed_after_the_approval_the_grant_waits_for_a_fresh_proxy_and_runs_once(
    journal: str, workflow: str, tmp_path: Path, rules: str
) -> None:
    """The proxy that asked dies while the person approves: the grant is in the journal, not in that process."""
    with proxy(journal, tmp_path, rules) as asker:
        asker.initialize()
        approval_id = asker.call("send_email", MAIL)["error"]["data"]["approval"]
        approve(journal, approval_id)
        asker.kill()
    assert approvals(journal) == {approval_id: ApprovalState.GRANTED}
    assert "result" in call_once(journal, tmp_path, rules)
    second = call_once(journal, tmp_path, rules)  # the grant is spent: the same call asks anew
    assert second["error"]["code"] == APPROVAL_REQUIRED
    assert sent(tmp_path) == 1
    # One call, completed (at #3: the killed proxy held #1 and #2 ahead, docs/sessions.md).
    assert list(journal_states(journal, workflow).values()) == [CallState.COMPLETED]


@pytest.mark.parametrize("point", APPROVED_CALL_CRASHES)
def test_killed_on_the_approved_call_it_never_runs_twice_nor_on_a_spent_approval(
    journal: str, workflow: str, tmp_path: Path, rules: str, point: str
) -> None:
    approval_id = call_once(journal, tmp_path, rules)["error"]["data"]["approval"]
    approve(journal, approval_id)
    killed_at(journal, tmp_path, rules, point)
    state, possible = APPROVED_CALL_CRASHES[point]
    # The approval was used in the transaction that reserved the call: both or neither, never one.
    assert approvals(journal) == {approval_id: ApprovalState.USED}
    assert journal_states(journal, workflow) == {1: state}
    runs = sent(tmp_path)
    assert runs in possible

    # The agent, resumed, sends the same call again through a fresh proxy: the spent approval runs nothing. A call
    # that may have run (PENDING) is found by its content and surfaced in doubt, so nobody is asked to approve a
    # second run of it; one that completed needs a new approval to run again.
    again = call_once(journal, tmp_path, rules)
    expected = {approval_id: ApprovalState.USED}
    if state is CallState.COMPLETED:
        assert again["error"]["code"] == APPROVAL_REQUIRED, again
        fresh_id = again["error"]["data"]["approval"]
        assert fresh_id != approval_id
        expected[fresh_id] = ApprovalState.PENDING
    else:
        assert again["error"]["code"] == IN_DOUBT, again
    assert sent(tmp_path) == runs
    # The same call at its sequence is answered from the journal: in doubt, or its journaled outcome.
    with proxy(journal, tmp_path, rules) as resumed:
        resumed.initialize()
        replay = resumed.call("send_email", MAIL, seq=1)
        assert resumed.close() == 0, resumed.stderr
    if state is CallState.COMPLETED:
        assert replay["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    else:
        assert replay["error"]["code"] == IN_DOUBT
    assert sent(tmp_path) == runs
    assert approvals(journal) == expected


def test_under_a_repeat_rule_too_the_same_call_after_a_crash_in_flight_is_in_doubt_not_a_new_request(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    """Without a sequence, the spent approval's call is found by its content first: surfaced in doubt, so nobody is
    asked to approve a second run of a call that may have run."""
    path = tmp_path / "policy.toml"
    path.write_text('[tools.send_email]\napprove = "operator"\nrepeat = "refuse"\n', encoding="utf-8")
    rules = str(path)
    approval_id = call_once(journal, tmp_path, rules)["error"]["data"]["approval"]
    approve(journal, approval_id)
    killed_at(journal, tmp_path, rules, "after_upstream_reply")
    assert sent(tmp_path) == 1
    again = call_once(journal, tmp_path, rules)
    assert again["error"]["code"] == IN_DOUBT, again
    assert approvals(journal) == {approval_id: ApprovalState.USED}  # no new request
    assert sent(tmp_path) == 1
    assert journal_states(journal, workflow) == {1: CallState.PENDING}
