"""In-doubt calls settled by a tool policy, end to end: a real proxy killed at a named point, a real upstream whose
ledger says what really happened, a real journal; the next proxy meets the in-doubt call and settles it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT
from ledger import POLICY, ledger, verified

from support import ProxyProcess, journal_calls, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
CHARGE = {"customer": "alice", "cents": 4200}


def proxy(journal: str, tmp_path: Path, probe: str = "list_outbox", trigger: str | None = None) -> ProxyProcess:
    policy = tmp_path / f"policy-{probe}.toml"
    policy.write_text(POLICY.format(probe=probe))
    env = {"LEDGER_DIR": str(tmp_path)}
    if trigger:
        env["CHECKPOINT_DEBUG_TRIGGER"] = trigger
    command = server_cmd("ledger_server.py")
    return ProxyProcess("--upstream-cmd", command, "--journal", journal, "--policy", str(policy), env=env)


def crash_during(journal: str, tmp_path: Path, tool: str, arguments: dict[str, Any], trigger: str, **meta: Any) -> None:
    """Leave the call in doubt: the proxy SIGKILLs itself at ``trigger`` while the call is in flight."""
    with proxy(journal, tmp_path, trigger=trigger) as crashing:
        crashing.initialize()
        crashing.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, **meta},
            }
        )
        assert crashing.proc.wait(20) != 0


def call(p: ProxyProcess, tool: str, arguments: dict[str, Any], seq: int = 1) -> dict[str, Any]:
    return p.call(tool, arguments, seq=seq)


def resolutions(journal: str, workflow: str) -> list[Any]:
    store = open_journal(journal, create=False)
    try:
        return store.resolutions(workflow)
    finally:
        store.close()


def test_a_mail_the_probe_finds_sent_is_settled_completed_and_not_sent_again(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
    assert journal_calls(journal, workflow)[0].state is CallState.PENDING
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        answer = call(resumed, "send_email", MAIL)
        again = call(resumed, "send_email", MAIL)
    result = answer["result"]
    assert result["_meta"]["checkpoint/journal"] == {"workflow": workflow, "seq": 1, "replayed": True}
    evidence = result["_meta"]["checkpoint/settled"]
    assert evidence["by"] == "probe"
    assert evidence["probe"] == "list_outbox"
    assert evidence["verdict"] == "happened"
    assert evidence["arguments"] == MAIL
    assert evidence["result"]["structuredContent"] == {"count": 1}
    assert "never received" in result["content"][0]["text"]
    assert again["result"]["content"] == result["content"]
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]  # not sent twice
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    [audit] = resolutions(journal, workflow)
    assert audit.action is ResolveAction.COMPLETED
    assert audit.user == "checkpoint (probe list_outbox)"
    verified(journal)


def test_a_mail_the_probe_finds_unsent_is_released_and_sent_now(journal: str, workflow: str, tmp_path: Path) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_pending_commit", _meta={"checkpoint_seq": 1})
    assert ledger(tmp_path) == []
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        answer = call(resumed, "send_email", MAIL)
    assert answer["result"]["content"][0]["text"] == "sent 'Your invoice' to bob@example.com"
    assert answer["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    [audit] = resolutions(journal, workflow)
    assert audit.action is ResolveAction.RELEASED
    assert audit.user == "checkpoint (probe list_outbox)"
    verified(journal)
    assert json.loads(audit.outcome)["verdict"] == "not_happened"


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        ("probe_error", "the probe answered with an error"),
        ("probe_hang", "no answer within 1s"),
        ("probe_odd", "neither happened_if nor not_happened_if matched"),
    ],
)
def test_a_probe_that_errs_hangs_or_is_ambiguous_leaves_the_call_in_doubt(
    journal: str, workflow: str, tmp_path: Path, probe: str, reason: str
) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    with proxy(journal, tmp_path, probe=probe) as resumed:
        resumed.initialize()
        answer = call(resumed, "send_email", MAIL)
        assert answer["error"]["code"] == IN_DOUBT
        assert answer["error"]["data"]["settlement"]["reason"] == reason
        assert answer["error"]["data"]["settlement"]["verdict"] == "unknown"
        # The proxy goes on: the next call is served, and the probe's late answer (if any) never reaches us.
        other = call(resumed, "send_email", {"to": "carol@example.com", "subject": "Hi"}, seq=2)
        assert "result" in other
    assert journal_calls(journal, workflow)[0].state is CallState.PENDING
    assert resolutions(journal, workflow) == []
    assert [e["event"] for e in ledger(tmp_path)] == ["done", "done"]


def test_every_charge_carries_a_key_derived_from_workflow_and_sequence(journal: str, tmp_path: Path) -> None:
    with proxy(journal, tmp_path) as p:
        p.initialize()
        call(p, "charge_card", CHARGE, seq=1)
        call(p, "charge_card", {**CHARGE, "cents": 100}, seq=2)
        call(p, "charge_card", {**CHARGE, "idempotency_key": "mine"}, seq=3)
    keys = [e["key"] for e in ledger(tmp_path)]
    assert keys[0].startswith("checkpoint-")
    assert keys[1].startswith("checkpoint-")
    assert keys[0] != keys[1]
    assert keys[2] == "mine"  # the agent's own argument is left alone


@pytest.mark.parametrize("trigger", ["after_upstream_reply", "after_pending_commit"])
def test_an_in_doubt_charge_is_sent_again_under_the_same_key_and_charged_once(
    journal: str, workflow: str, tmp_path: Path, trigger: str
) -> None:
    crash_during(journal, tmp_path, "charge_card", CHARGE, trigger, _meta={"checkpoint_key": "charge-alice"})
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        answer = resumed.request(
            "tools/call", {"name": "charge_card", "arguments": CHARGE, "_meta": {"checkpoint_key": "charge-alice"}}
        )
    assert answer["result"]["content"][0]["text"] == "charged alice 4200 cents"
    charges = [e for e in ledger(tmp_path) if e["event"] == "done"]
    assert len(charges) == 1
    if trigger == "after_upstream_reply":
        assert [e["event"] for e in ledger(tmp_path)] == ["done", "dedup"]
        assert ledger(tmp_path)[0]["key"] == ledger(tmp_path)[1]["key"]
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    [audit] = resolutions(journal, workflow)
    assert audit.action is ResolveAction.RELEASED
    assert audit.user == "checkpoint (idempotency key)"
    assert json.loads(audit.outcome)["key"] == charges[0]["key"]
    verified(journal)


def test_a_different_call_at_an_in_doubt_sequence_is_still_refused(journal: str, tmp_path: Path) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        answer = call(resumed, "send_email", {**MAIL, "subject": "Another"})
    assert answer["error"]["code"] == IN_DOUBT
    assert "settlement" not in answer["error"]["data"]


def test_an_agent_passing_no_sequence_meets_its_in_doubt_mail_by_content_and_the_probe_settles_it(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    """A client that opens a new proxy per call and names no sequence: its repeat is caught by content (part of
    the policy's ``repeat`` rule), and the in-doubt original is settled by the probe instead of refused."""
    policy = tmp_path / "policy-repeat.toml"
    policy.write_text('[default]\nrepeat = "replay"\n' + POLICY.format(probe="list_outbox"))
    env = {"LEDGER_DIR": str(tmp_path), "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"}
    argv = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--policy", str(policy))
    with ProxyProcess(*argv, env=env) as crashing:
        crashing.initialize()
        crashing.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send_email", "arguments": MAIL}}
        )
        assert crashing.proc.wait(20) != 0
    del env["CHECKPOINT_DEBUG_TRIGGER"]
    with ProxyProcess(*argv, env=env) as fresh:
        fresh.initialize()
        answer = fresh.call("send_email", MAIL)  # no sequence, no key: the cursor would give it #2
    meta = answer["result"]["_meta"]
    assert meta["checkpoint/journal"]["seq"] == 1
    assert meta["checkpoint/journal"]["replayed"] is True
    assert meta["checkpoint/settled"]["verdict"] == "happened"
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
    assert [row.state for row in journal_calls(journal, workflow)] == [CallState.COMPLETED]
    verified(journal)


def test_with_redacted_arguments_the_probe_still_settles_and_no_byte_of_them_reaches_the_journal(
    tmp_path: Path,
) -> None:
    journal = str(tmp_path / "j.db")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    argv = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--policy", str(policy))
    argv += ("--redact-args-in-journal",)
    env = {"LEDGER_DIR": str(tmp_path)}
    with ProxyProcess(*argv, env={**env, "CHECKPOINT_DEBUG_TRIGGER": "after_upstream_reply"}) as crashing:
        crashing.initialize()
        params = {"name": "send_email", "arguments": MAIL, "_meta": {"checkpoint_seq": 1}}
        crashing.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashing.proc.wait(20) != 0
    with ProxyProcess(*argv, env=env) as resumed:
        resumed.initialize()
        answer = resumed.call("send_email", MAIL, seq=1)
        assert resumed.close() == 0
    assert answer["result"]["_meta"]["checkpoint/settled"]["arguments"] == "«redacted»"
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
    for path in (p for p in tmp_path.glob("j.db*") if p.is_file()):
        assert b"bob@example.com" not in path.read_bytes(), path


def test_a_probe_is_called_only_once_its_tool_is_known_read_only(journal: str, workflow: str, tmp_path: Path) -> None:
    """Not declared read_only in the policy: the probe waits until a tools/list marking it readOnlyHint has passed
    through the proxy; before that the call stays in doubt and the probe is never called."""
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    policy = tmp_path / "undeclared.toml"
    policy.write_text(POLICY.format(probe="list_outbox").replace("[tools.list_outbox]\nread_only = true\n", ""))
    argv = ("--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--policy", str(policy))
    with ProxyProcess(*argv, env={"LEDGER_DIR": str(tmp_path)}) as resumed:
        resumed.initialize()
        refused = resumed.call("send_email", MAIL, seq=1)
        assert refused["error"]["code"] == IN_DOUBT
        assert "not known to be read-only" in refused["error"]["data"]["settlement"]["reason"]
        resumed.request("tools/list")  # the upstream marks list_outbox readOnlyHint: true
        settled = resumed.call("send_email", MAIL, seq=1)
    assert settled["result"]["_meta"]["checkpoint/settled"]["verdict"] == "happened"
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
