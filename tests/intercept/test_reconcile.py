"""`checkpoint journal reconcile`: the operator settles in-doubt calls on demand by the policy's own means."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_settle_e2e import CHARGE, MAIL, crash_during, proxy

from checkpoint_mcp.journal.records import CallState
from ledger import ledger, verified

from support import checkpoint_argv, journal_calls, server_cmd


def reconcile(journal: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    policy = tmp_path / "policy-list_outbox.toml"
    argv = checkpoint_argv(
        "journal", "reconcile", "--journal", journal, "--policy", str(policy),
        "--upstream-cmd", server_cmd("ledger_server.py"), *extra,
    )  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_env(tmp_path), check=False)


def _env(tmp_path: Path) -> dict[str, str]:
    import os

    return {**os.environ, "LEDGER_DIR": str(tmp_path)}


def test_reconcile_settles_each_in_doubt_call_and_a_dry_run_changes_nothing(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    unsent = {"to": "carol@example.com", "subject": "Thanks"}
    crash_during(journal, tmp_path, "send_email", unsent, "after_pending_commit", _meta={"checkpoint_seq": 2})
    crash_during(journal, tmp_path, "charge_card", CHARGE, "after_upstream_reply", _meta={"checkpoint_seq": 3})
    assert [row.state for row in journal_calls(journal, workflow)] == [CallState.PENDING] * 3

    dry = reconcile(journal, tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "#1 send_email: completed — would be completed: probe list_outbox: happened_if matched" in dry.stdout
    assert "#2 send_email: released — would be released" in dry.stdout
    assert "#3 charge_card: re-sent — would be sent again under its idempotency key checkpoint-" in dry.stdout
    assert [row.state for row in journal_calls(journal, workflow)] == [CallState.PENDING] * 3

    done = reconcile(journal, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    decisions = {d["seq"]: d for d in json.loads(done.stdout)}
    assert {seq: d["outcome"] for seq, d in decisions.items()} == {1: "completed", 2: "released", 3: "completed"}
    assert decisions[1]["evidence"]["result"]["structuredContent"] == {"count": 1}
    rows = {row.seq: row for row in journal_calls(journal, workflow)}
    assert set(rows) == {1, 3}
    assert rows[1].state is rows[3].state is CallState.COMPLETED
    charges = [e for e in ledger(tmp_path) if e["tool"] == "charge_card"]
    assert [e["event"] for e in charges] == ["done", "dedup"]  # sent again under the same key: charged once

    again = reconcile(journal, tmp_path)
    assert again.stdout.strip() == "no call is in doubt"

    # The released sequence runs when the agent makes the call again; the completed one replays.
    with proxy(journal, tmp_path) as resumed:
        resumed.initialize()
        assert resumed.call("send_email", unsent, seq=2)["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
        assert resumed.call("send_email", MAIL, seq=1)["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    mails = [e for e in ledger(tmp_path) if e["tool"] == "send_email"]
    assert len(mails) == 2
    verified(journal)


def test_reconcile_is_refused_while_a_live_proxy_owns_the_workflow(journal: str, tmp_path: Path) -> None:
    crash_during(journal, tmp_path, "send_email", MAIL, "after_upstream_reply", _meta={"checkpoint_seq": 1})
    with proxy(journal, tmp_path) as live:
        live.initialize()
        refused = reconcile(journal, tmp_path)
    assert refused.returncode == 1
    assert "owned by another live proxy" in refused.stderr
    assert "stop that proxy first" in refused.stderr
