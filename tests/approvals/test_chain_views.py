"""Every step of an approval request on the hash chain, through real proxies and the real CLI: `journal verify`
stays clean, `journal show` tells each step in words, `export` carries the requests and verifies offline."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import ApprovalState

from support import ProxyProcess, checkpoint_argv, server_cmd

EXPIRED = ApprovalState.EXPIRED
POLICY = '[tools.send_email]\napprove = "operator"\n[tools.send_quiet]\napprove = "operator"\napproval_expires = "1s"\n'


def agent_call(journal: str, tmp_path: Path, to: str, tool: str = "send_email") -> dict[str, Any]:
    rules = tmp_path / "policy.toml"
    rules.write_text(POLICY, encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--policy", str(rules)]
    with ProxyProcess(*argv, "--workflow-id", "wf", env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}) as proxy:
        proxy.initialize()
        reply = proxy.call(tool, {"to": to})
        assert proxy.close() == 0, proxy.stderr
    return reply


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(checkpoint_argv(*args), capture_output=True, text=True, timeout=30, check=False)
    if ok:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def requested(journal: str, tmp_path: Path, to: str, tool: str = "send_email") -> int:
    number = agent_call(journal, tmp_path, to, tool)["error"]["data"]["approval"]
    assert isinstance(number, int)
    return number


def every_step(journal: str, tmp_path: Path) -> tuple[int, int, int, int]:
    """Request, grant and use #a; request and deny #b; request and grant #c, let it expire, ask anew (#d)."""
    used = requested(journal, tmp_path, "bob")
    cli("journal", "approve", "--journal", journal, str(used))
    assert "result" in agent_call(journal, tmp_path, "bob")
    denied = requested(journal, tmp_path, "eve")
    cli("journal", "approve", "--journal", journal, str(denied), "--deny", "--reason", "not a customer")
    expired = requested(journal, tmp_path, "carol", "send_quiet")
    cli("journal", "approve", "--journal", journal, str(expired))
    reader = open_journal(journal)
    try:  # send_quiet's grants hold 1s: wait for this one to pass its time (the chain forbids aging it by hand)
        deadline = time.monotonic() + 10
        while (grant := reader.approvals.approval(expired)) is None or grant.state_at(utc_now()) is not EXPIRED:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        reader.close()
    fresh = requested(journal, tmp_path, "carol", "send_quiet")  # the proxy records the expiry, then asks anew
    return used, denied, expired, fresh


def test_verify_stays_clean_and_show_tells_every_step_of_every_approval(journal: str, tmp_path: Path) -> None:
    used, denied, expired, fresh = every_step(journal, tmp_path)

    verified = cli("journal", "verify", "--journal", journal, "wf", "--json")
    assert json.loads(verified.stdout)["ok"] is True

    shown = cli("journal", "show", "--journal", journal, "wf").stdout
    assert f"approval #{used} (send_email)" in shown
    assert "requested: the call waits for a person's approval" in shown
    assert f"approval #{used} (send_email) at " in shown
    assert "used by call #1: the approved call ran" in shown
    assert "denied by " in shown
    assert "not a customer" in shown
    assert f"approval #{expired} (send_quiet) at " in shown
    assert "expired: granted, but not used in time" in shown
    assert f"approval #{fresh} (send_quiet) at " in shown

    one = cli("journal", "show", "--journal", journal, "wf", "--seq", "1").stdout
    steps = [line.strip() for line in one.splitlines() if line.strip().startswith(f"approval #{used} ")]
    assert [step.split(": ", 1)[1].split(" ")[0].rstrip(":") for step in steps] == ["requested", "granted", "used"]
    assert f"approval #{denied} " not in one  # only the approval this call ran on

    as_json = json.loads(cli("journal", "show", "--journal", journal, "wf", "--seq", "1", "--json").stdout)
    assert [n["action"] for n in as_json["policyNotes"]] == ["requested", "granted", "used"]


def test_export_carries_the_requests_and_verifies_offline(journal: str, tmp_path: Path) -> None:
    used, denied, expired, fresh = every_step(journal, tmp_path)
    exported = cli("journal", "export", "--journal", journal, "wf").stdout
    lines = [json.loads(line) for line in exported.splitlines()]
    approvals = [line for line in lines if line["type"] == "approval"]
    assert [(a["id"], a["state"]) for a in approvals] == [
        (used, "used"),
        (denied, "denied"),
        (expired, "expired"),
        (fresh, "pending"),
    ]
    assert approvals[0]["arguments"] == {"to": "bob"}
    assert approvals[0]["used_seq"] == 1
    assert approvals[1]["reason"] == "not a customer"
    chained = [line["detail"]["action"] for line in lines if line["type"] == "link" and line["kind"] == "approval"]
    assert chained.count("requested") == 4
    assert chained.count("expired") == 1

    (tmp_path / "wf.jsonl").write_text(exported, encoding="utf-8")
    offline = cli("journal", "verify", "--export", str(tmp_path / "wf.jsonl"), "--json")
    assert json.loads(offline.stdout)["ok"] is True
    # The file is checked, not waved through: an approval link edited in it breaks the chain.
    edited = exported.replace('"action":"denied"', '"action":"granted"').replace(
        '"action": "denied"', '"action": "granted"'
    )
    assert edited != exported
    (tmp_path / "edited.jsonl").write_text(edited, encoding="utf-8")
    broken = cli("journal", "verify", "--export", str(tmp_path / "edited.jsonl"), ok=False)
    assert broken.returncode == 1
    assert "edited" in broken.stdout


def test_approval_rows_changed_by_hand_are_named_by_verify_online_and_offline(journal: str, tmp_path: Path) -> None:
    denied = requested(journal, tmp_path, "eve")
    cli("journal", "approve", "--journal", journal, str(denied), "--deny")
    waiting = requested(journal, tmp_path, "bob")
    exported = cli("journal", "export", "--journal", journal, "wf").stdout
    # Offline: a denial turned into a grant in the export file is caught.
    forged = "\n".join(
        json.dumps({**line, "stored_state": "granted"}) if line.get("id") == denied and line["type"] == "approval"
        else json.dumps(line)
        for line in map(json.loads, exported.splitlines())
    )  # fmt: skip
    (tmp_path / "forged.jsonl").write_text(forged, encoding="utf-8")
    offline = cli("journal", "verify", "--export", str(tmp_path / "forged.jsonl"), "--json", ok=False)
    assert offline.returncode == 1
    (report,) = json.loads(offline.stdout)["workflows"]
    assert [b["message"] for b in report["breaks"]] == [
        f"edited: the row of approval #{denied} was changed: its state is granted, the chain says denied"
    ]
    # Online: the same forgery in the database, a waiting request removed, another slipped in.
    tamper = open_journal(journal)
    try:
        with tamper.transaction():
            tamper.execute(
                "UPDATE approvals SET state = 'granted', expires_at = '2999-01-01T00:00:00.000Z' WHERE id = ?",
                (denied,),
            )
            tamper.execute(
                "INSERT INTO approvals (workflow_id, tool, arguments, signature, call_key, state, requested_at,"
                " requested_by, expires_after) VALUES ('wf', 'send_email', '{}', 'x', 'x', 'granted', 'now', '{}', 60)"
            )
            tamper.execute("DELETE FROM approvals WHERE id = ?", (waiting,))  # after: SQLite would reuse its id
    finally:
        tamper.close()
    online = cli("journal", "verify", "--journal", journal, "wf", "--json", ok=False)
    assert online.returncode == 1
    (report,) = json.loads(online.stdout)["workflows"]
    kinds = sorted(b["kind"] for b in report["breaks"])
    assert kinds == ["edited", "inserted", "removed"]
    messages = " | ".join(b["message"] for b in report["breaks"])
    assert f"approval #{denied} was changed: its state is granted, the chain says denied" in messages
    assert f"removed: approval #{waiting} (send_email) is in the chain but its row is gone" in messages
    assert "has a row but no link" in messages
