"""The resume brief names the approval requests that change what a resumed agent does: waiting for a person,
approved but not yet sent, or denied. Through real proxies and the real `checkpoint brief` command, on SQLite
and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_digest import APPROVALS_FETCH
from checkpoint_mcp.session.effects import APPROVALS_SHOWN

from support import checkpoint_argv, decide_request, done_count, effects_proxy

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}
OTHER = {"to": "eve@example.com", "subject": "Your refund"}
POLICY = '[tools.send_email]\napprove = "operator"\n'
APPROVALS = "### Approvals: these calls run only on a person's approval of their exact arguments"


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends in every run: the brief reads approvals wherever the journal lives."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def send(location: str, tmp_path: Path, arguments: dict[str, Any], *extra: str) -> dict[str, Any]:
    """One send_email from a fresh proxy under the approval policy."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    with effects_proxy(location, tmp_path, "--policy", str(policy), *extra) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", arguments)
        assert proxy.close() == 0, proxy.stderr
    return reply


def brief(location: str, project: Path, *options: str) -> str:
    """What `checkpoint brief --journal LOCATION` prints for a project with no session checkpoint."""
    argv = checkpoint_argv("brief", "--project-root", str(project), "--journal", location, *options)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def decide(location: str, approval_id: int, grant: bool, reason: str | None = None) -> str:
    """A person's decision, stored as `checkpoint journal approve` stores it; the journal as commands name it."""
    return decide_request(location, approval_id, grant, reason)


def test_the_brief_says_what_waits_what_is_approved_and_what_was_denied(location: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    first = send(location, tmp_path, MAIL)["error"]["data"]["approval"]
    second = send(location, tmp_path, OTHER)["error"]["data"]["approval"]

    waiting = brief(location, project)
    shown = decide(location, second, False, "wrong customer")  # only after the first brief: it saw both wait
    assert APPROVALS in waiting, waiting
    for approval_id in (first, second):
        line = next(
            line for line in waiting.splitlines() if line.startswith(f"- Waiting for approval: #{approval_id} ")
        )
        assert f"`checkpoint journal approve --journal {shown} {approval_id}`" in line, line
        assert "then send the same call again with the same arguments" in line, line
    assert '`{"to":"bob@example.com","subject":"Your invoice"}`' in waiting, waiting
    assert "Approved, not yet sent" not in waiting

    decide(location, first, True)
    decided = brief(location, project)
    approved = next(line for line in decided.splitlines() if line.startswith("- Approved, not yet sent: "))
    assert f"#{first} `send_email`" in approved, approved
    assert "(by alice, usable until " in approved, approved
    assert "send it again with the same arguments to run it (once)" in approved, approved
    denied = next(line for line in decided.splitlines() if line.startswith("- Denied by alice: wrong customer"))
    assert f"#{second} `send_email`" in denied, denied
    assert "do not send it again" in denied, denied
    assert "Waiting for approval" not in decided, decided
    full = json.loads(brief(location, project, "--format", "full"))
    (entry,) = full["journals"]
    assert [(a["id"], a["status"]) for a in entry["approvals"]] == [(first, "approved"), (second, "denied")]
    assert entry["approvals"][0]["arguments"] == '{"to":"bob@example.com","subject":"Your invoice"}'
    assert entry["approvals"][1]["reason"] == "wrong customer"

    # Sent again, it runs on the approval; the approval is spent and the brief no longer asks for anything on it.
    assert "result" in send(location, tmp_path, MAIL)
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    after = brief(location, project)
    assert "Approved, not yet sent" not in after, after
    assert '`send_email` `{"to":"bob@example.com","subject":"Your invoice"}` ✓' in after, after  # now done
    assert "- Denied by alice: wrong customer" in after, after


def test_a_redacted_request_is_shown_without_its_arguments_in_the_hook_output(tmp_path: Path) -> None:
    location = str(tmp_path / "j.db")
    project = tmp_path / "project"
    project.mkdir()
    refused = send(location, tmp_path, MAIL, "--redact-args-in-journal")
    assert refused["error"]["data"]["reason"] == "awaiting_approval"

    hook = json.loads(brief(location, project, "--hook"))
    context = hook["hookSpecificOutput"]["additionalContext"]
    line = next(line for line in context.splitlines() if line.startswith("- Waiting for approval: #1 "))
    assert "`send_email` «redacted»" in line, line
    assert "bob@example.com" not in context


def test_many_requests_are_capped_and_counted_so_the_brief_stays_short(tmp_path: Path) -> None:
    location = str(tmp_path / "j.db")
    project = tmp_path / "project"
    project.mkdir()
    send(location, tmp_path, MAIL)  # creates the journal as a proxy does
    request(location, range(9))

    text = brief(location, project)
    lines = [line for line in text.splitlines() if line.startswith("- Waiting for approval: ")]
    assert len(lines) == APPROVALS_SHOWN, text
    assert "#10 `send_email`" in lines[0], lines[0]  # newest first
    assert all(len(line) < 600 for line in lines), lines  # arguments cut: the agent can list them all
    assert f"- … {10 - APPROVALS_SHOWN} more approval request(s) not shown: " in text, text
    assert f"`checkpoint journal approvals --journal {location}`" in text, text

    request(location, range(9, 30))  # more than the brief reads: it says so, and stays short
    text = brief(location, project)
    assert f"- … over {APPROVALS_FETCH - APPROVALS_SHOWN} more approval request(s) not shown: " in text, text
    assert len(text) < 10_000


def request(location: str, numbers: range) -> None:
    """Requests of other e-mails (long ones) in the workflow of the journal's first request."""
    journal = open_journal(location)
    try:
        workflow = journal.approvals.approvals()[-1].workflow
        for n in numbers:
            arguments = json.dumps({"to": f"customer{n}@example.com", "body": "x" * 400})
            journal.approvals.request_approval(workflow, "send_email", arguments, f"{n:064x}", None, {"pid": 1}, 3600)
    finally:
        journal.close()
