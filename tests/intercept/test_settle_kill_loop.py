"""A kill loop: proxies SIGKILLed mid-call, over and over, and every settlement compared with the upstream's ledger.

An agent works through a script of e-mails (settled by a probe) and card charges (settled by the upstream's own
idempotency key), each call pinned to its sequence. A proxy is SIGKILLed (its upstream's process tree with it) at
a random moment of a call, while the upstream's side effect happens at a random moment too; a fresh proxy then
meets the in-doubt call and settles it, with no operator. In the end every e-mail went out exactly once, every
card was charged exactly once, and no call is left in doubt.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from checkpoint_mcp.intercept.settle_rules import idempotency_key
from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.records import CallState
from ledger import POLICY, ledger, step, verified

from support import ProxyProcess, server_cmd

KILLS = 100
STEPS = 40
DELAY_MS = 40  # the upstream waits 0..40 ms before and after each side effect


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_hundred_kills_mid_call_leave_no_wrong_settlement_no_double_execution_and_nothing_in_doubt(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    journal = str(request.getfixturevalue("pg_url")) if backend == "postgres" else str(tmp_path / "j.db")
    workflow = default_workflow_id(journal)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    env = {"LEDGER_DIR": str(tmp_path), "LEDGER_DELAY_MS": str(DELAY_MS)}
    rng = random.Random(18)
    started = time.monotonic()
    kills, n, answers = 0, 1, {}
    while n <= STEPS:
        with ProxyProcess(
            "--upstream-cmd", server_cmd("ledger_server.py"), "--journal", journal, "--policy", str(policy), env=env
        ) as proxy:
            proxy.initialize()
            while n <= STEPS:
                tool, arguments = step(n)
                if kills < KILLS and rng.random() < 0.7:
                    params = {"name": tool, "arguments": arguments, "_meta": {"checkpoint_seq": n}}
                    proxy.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
                    time.sleep(rng.uniform(0.005, 2.5 * DELAY_MS / 1000))
                    proxy.kill()
                    kills += 1
                    break
                answer = proxy.call(tool, arguments, seq=n)
                assert "result" in answer, (n, answer, proxy.stderr)
                answers[n] = answer["result"]
                n += 1
        if n > STEPS and kills < KILLS:
            n = 1  # go round again: replays, and in-doubt calls met once more, until every kill is spent
    assert kills == KILLS
    print(f"{kills} kills in {time.monotonic() - started:.0f}s")

    entries = ledger(tmp_path)
    for n in range(1, STEPS + 1):
        tool, arguments = step(n)
        if tool == "send_email":
            sent = [e for e in entries if e["tool"] == tool and e["to"] == arguments["to"] and e["event"] == "done"]
            assert len(sent) == 1, (n, sent)  # a wrong settlement would show 0 (completed unsent) or 2 (re-sent)
        else:
            charged = [e for e in entries if e["tool"] == tool and e["customer"] == arguments["customer"]]
            assert [e["event"] for e in charged].count("done") == 1, (n, charged)
            assert {e["key"] for e in charged} == {idempotency_key(workflow, n, None)}

    store = open_journal(journal, create=False)
    try:
        rows = store.calls(workflow)
        audit = store.resolutions(workflow)
    finally:
        store.close()
    assert len(rows) == STEPS
    assert all(row.state is CallState.COMPLETED for row in rows)  # nothing left in doubt
    for resolution in audit:
        tool, arguments = step(resolution.seq)
        detail = json.loads(resolution.outcome or "null")
        if resolution.action is ResolveAction.COMPLETED:  # the probe saw the mail: it must be in the ledger
            assert tool == "send_email"
            assert detail["_meta"]["checkpoint/settled"]["result"]["structuredContent"] == {"count": 1}
        else:
            assert resolution.action is ResolveAction.RELEASED
            assert detail["by"] in ("probe", "idempotency")
    settled_by_probe = sum(1 for r in audit if r.user == "checkpoint (probe list_outbox)")
    settled_by_key = sum(1 for r in audit if r.user == "checkpoint (idempotency key)")
    print(f"{kills} kills: {settled_by_probe} settlements by probe, {settled_by_key} by idempotency key")
    verified(journal)
    assert settled_by_probe > 0
    assert settled_by_key > 0
