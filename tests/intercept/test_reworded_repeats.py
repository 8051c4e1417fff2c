"""Repeats the way models make them, through real proxies with a policy file, a fresh `checkpoint` per call, on
SQLite and on PostgreSQL: a reworded call under `match` / `ignore` (with `normalize`) is the same call, and
`repeat = "confirm"` runs a repeat only when it is sent again within `confirm_within`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.refusals import REPEAT_REFUSED

from support import ProxyProcess, checkpoint_argv, done_count, read_effects, server_cmd


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def fresh_call(location: str, tmp_path: Path, arguments: dict[str, Any], policy_file: str) -> dict[str, Any]:
    """One send_email from a new proxy process, as a client that opens a session per call makes it."""
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", location, "--policy", policy_file)
    with ProxyProcess(*argv, env=env) as p:
        p.initialize()
        reply = p.call("send_email", arguments)
        assert p.close() == 0, p.stderr
    return reply


def repeat_events(location: str) -> list[dict[str, Any]]:
    journal: Any = open_journal(location)
    try:
        rows = journal.execute(
            "SELECT detail FROM events WHERE workflow_id = ? AND kind = 'repeat' ORDER BY id",
            (default_workflow_id(location),),
        ).fetchall()
    finally:
        journal.close()
    return [json.loads(row[0]) for row in rows]


def sent(tmp_path: Path) -> list[str]:
    return [e["arguments"].get("body", "") for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done"]


def verified(location: str) -> bool:
    done = subprocess.run(
        checkpoint_argv("journal", "verify", "--journal", location),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


MATCH = '[tools.send_email]\nrepeat = "refuse"\nmatch = ["/to", "/subject"]\n'
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, here is your invoice."}


def test_a_reworded_repeat_under_match_is_refused_and_says_what_differs(location: str, tmp_path: Path) -> None:
    rules = policy(tmp_path, MATCH)
    fresh_call(location, tmp_path, MAIL, rules)
    reworded = {**MAIL, "body": "Hello Bob! Your invoice is attached."}
    refused = fresh_call(location, tmp_path, reworded, rules)
    other = fresh_call(location, tmp_path, {**MAIL, "subject": "Your receipt"}, rules)
    assert sent(tmp_path) == [MAIL["body"], MAIL["body"]]  # the original, then the other subject
    assert "result" in other
    error = refused["error"]
    assert error["code"] == REPEAT_REFUSED
    message = error["message"]
    # The message stands alone: what ran, when, its result, how this call differs, what to do now.
    assert "send_email already ran" in message
    assert "call #1" in message
    assert "returned: sent to bob@example.com" in message
    assert '/body: "Hi Bob, here is your invoice." → "Hello Bob! Your invoice is attached."' in message
    assert "above" not in message
    assert error["data"]["difference"] == [
        '/body: "Hi Bob, here is your invoice." → "Hello Bob! Your invoice is attached."'
    ]
    (event,) = repeat_events(location)
    assert event["action"] == "refused"
    assert event["signature"] != event["originalSignature"]
    assert len(event["identity"]) == 64
    assert "bob@example.com" not in json.dumps(event)
    assert verified(location)


def test_ignore_and_normalize_make_a_retyped_call_the_same_and_an_absent_value_another(
    location: str, tmp_path: Path
) -> None:
    rules = policy(
        tmp_path,
        '[tools.send_email]\nrepeat = "refuse"\nignore = ["/body", "/sent_at"]\nnormalize = ["trim", "space", "case"]\n',
    )
    fresh_call(location, tmp_path, {**MAIL, "sent_at": "09:00"}, rules)
    retyped = {"to": " Bob@Example.com", "subject": "your   invoice ", "body": "Hi.", "sent_at": "09:05"}
    refused = fresh_call(location, tmp_path, retyped, rules)
    without_subject = fresh_call(location, tmp_path, {"to": "bob@example.com", "body": "x"}, rules)
    without_again = fresh_call(location, tmp_path, {"to": "bob@example.com", "body": "y"}, rules)
    assert refused["error"]["code"] == REPEAT_REFUSED
    assert "/sent_at" in refused["error"]["message"]
    assert "result" in without_subject  # lacking /subject is not the same as having it
    assert without_again["error"]["code"] == REPEAT_REFUSED  # both lack it: they agree there
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def test_confirm_refuses_the_first_repeat_runs_the_second_from_a_fresh_proxy_and_asks_again_after(
    location: str, tmp_path: Path
) -> None:
    rules = policy(tmp_path, '[tools.send_email]\nrepeat = "confirm"\nconfirm_within = "10m"\nmatch = ["/to"]\n')
    fresh_call(location, tmp_path, MAIL, rules)
    asked = fresh_call(location, tmp_path, {**MAIL, "body": "Once more"}, rules)
    confirmed = fresh_call(location, tmp_path, {**MAIL, "body": "Once more"}, rules)
    third = fresh_call(location, tmp_path, {**MAIL, "body": "And again"}, rules)
    assert sent(tmp_path) == [MAIL["body"], "Once more"]
    error = asked["error"]
    assert error["code"] == REPEAT_REFUSED
    assert error["data"]["reason"] == "confirm"
    assert error["data"]["confirmWithin"] == "10m"
    assert "send this call again within 10m: it will then run" in error["message"]
    assert "returned: sent to bob@example.com" in error["message"]
    assert confirmed["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert third["error"]["data"]["reason"] == "confirm"
    assert third["error"]["data"]["original"]["seq"] == 2  # the confirmed call is now the one repeated
    assert [e["action"] for e in repeat_events(location)] == ["confirm_asked", "confirmed", "confirm_asked"]
    assert verified(location)
    shown = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", location, default_workflow_id(location)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "refused, asking for a confirmation" in shown
    assert "confirmed: sent again within confirm_within, it ran again" in shown
