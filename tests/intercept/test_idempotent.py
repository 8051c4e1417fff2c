"""`idempotent = true`, end to end: a real proxy SIGKILLed mid-call leaves a call in doubt; the next proxy, met with
the same call again, sends it again as it is (the server's own promise) and records the settlement in the audit
chain; a repeat of a completed call of the tool runs, where every other tool's is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, REPEAT_REFUSED
from ledger import ledger, verified

from support import ProxyProcess, journal_calls, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
POLICY = """
[default]
repeat = "refuse"
window = "24h"

[tools.send_email]
idempotent = {idempotent}
"""


def proxy(journal: str, tmp_path: Path, idempotent: bool = True, trigger: str | None = None) -> ProxyProcess:
    policy = tmp_path / f"policy-{idempotent}.toml"
    policy.write_text(POLICY.format(idempotent="true" if idempotent else "false"))
    env = {"LEDGER_DIR": str(tmp_path)}
    if trigger:
        env["CHECKPOINT_DEBUG_TRIGGER"] = trigger
    command = server_cmd("ledger_server.py")
    return ProxyProcess("--upstream-cmd", command, "--journal", journal, "--policy", str(policy), env=env)


def crash_during(journal: str, tmp_path: Path, **meta: Any) -> None:
    """Leave the call in doubt: the proxy SIGKILLs itself once the upstream has answered, before the journal."""
    with proxy(journal, tmp_path, trigger="after_upstream_reply") as crashing:
        crashing.initialize()
        params = {"name": "send_email", "arguments": MAIL, **meta}
        crashing.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        assert crashing.proc.wait(20) != 0


def resolutions(journal: str, workflow: str) -> list[Any]:
    store = open_journal(journal, create=False)
    try:
        return store.resolutions(workflow)
    finally:
        store.close()


def test_an_in_doubt_call_of_an_idempotent_tool_sent_again_runs_and_is_audited(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    crash_during(journal, tmp_path)  # no sequence, no key: met again by its content
    assert journal_calls(journal, workflow)[0].state is CallState.PENDING
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        answer = resumed.call("send_email", MAIL)
    assert answer["result"]["content"][0]["text"] == "sent 'Your invoice' to bob@example.com"
    assert [e["event"] for e in ledger(tmp_path)] == ["done", "done"]  # sent again, as the policy allows
    [row] = journal_calls(journal, workflow)
    assert row.state is CallState.COMPLETED
    [audit] = resolutions(journal, workflow)
    assert audit.action is ResolveAction.RELEASED
    assert audit.user == "checkpoint (idempotent)"
    assert '"by":"idempotent"' in audit.outcome.replace(" ", "")
    verified(journal)


def test_without_the_key_the_same_in_doubt_call_is_refused(journal: str, workflow: str, tmp_path: Path) -> None:
    crash_during(journal, tmp_path, _meta={"checkpoint_seq": 1})
    with proxy(journal, tmp_path, idempotent=False) as resumed:
        resumed.initialize()
        answer = resumed.call("send_email", MAIL, seq=1)
    assert answer["error"]["code"] == IN_DOUBT
    assert [e["event"] for e in ledger(tmp_path)] == ["done"]
    assert journal_calls(journal, workflow)[0].state is CallState.PENDING
    assert resolutions(journal, workflow) == []


def test_a_repeat_of_a_completed_idempotent_call_runs_where_another_tool_is_refused(
    journal: str, tmp_path: Path
) -> None:
    with proxy(journal, tmp_path) as p:
        p.initialize()
        first, second = p.call("send_email", MAIL), p.call("send_email", MAIL)
        charge = {"customer": "alice", "cents": 4200}
        charged, refused = p.call("charge_card", charge), p.call("charge_card", charge)
    assert "result" in first
    assert "result" in second
    assert "result" in charged
    assert refused["error"]["code"] == REPEAT_REFUSED
    assert [e["tool"] for e in ledger(tmp_path) if e["event"] == "done"] == ["send_email", "send_email", "charge_card"]
