"""Approval gates under `--redact-args-in-journal`: a request keeps only the redacted marker and the call's
signature (a digest), never the arguments, and still binds the approval to the exact call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS
from checkpoint_mcp.refusals import APPROVAL_REQUIRED
from checkpoint_mcp.signature import call_signature

from support import approval_requests, decide_request, done_count, effects_proxy

SECRET = {"to": "bob@example.com", "subject": "Salary 98765"}
OTHER = {"to": "eve@example.com", "subject": "Salary 12345"}


def call(journal: str, tmp_path: Path, arguments: dict[str, Any]) -> dict[str, Any]:
    """send_email(arguments) from a fresh proxy that redacts arguments in the journal."""
    rules = tmp_path / "policy.toml"
    rules.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    with effects_proxy(journal, tmp_path, "--policy", str(rules), "--redact-args-in-journal") as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", arguments)
        assert proxy.close() == 0, proxy.stderr
    return reply


def requests(journal: str) -> list[Approval]:
    return approval_requests(journal)


def approve(journal: str, approval_id: int) -> None:
    decide_request(journal, approval_id)


def test_a_redacted_request_keeps_the_marker_and_the_digest_and_the_flow_still_works(
    journal: str, tmp_path: Path
) -> None:
    asked = call(journal, tmp_path, SECRET)
    assert asked["error"]["code"] == APPROVAL_REQUIRED
    other = call(journal, tmp_path, OTHER)["error"]["data"]["approval"]  # other arguments, their own request
    first = asked["error"]["data"]["approval"]
    assert other != first
    by_id = {found.id: found for found in requests(journal)}
    assert by_id[first].arguments == REDACTED_ARGUMENTS
    assert by_id[first].signature == call_signature("send_email", SECRET)
    assert by_id[other].signature == call_signature("send_email", OTHER)

    approve(journal, first)
    assert call(journal, tmp_path, OTHER)["error"]["data"]["approval"] == other  # not run on the other's approval
    ran = call(journal, tmp_path, SECRET)
    assert ran["result"]["content"][0]["text"] == "sent to bob@example.com"
    assert call(journal, tmp_path, SECRET)["error"]["code"] == APPROVAL_REQUIRED  # spent
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    states = {found.id: found.state for found in requests(journal)}
    assert states[first] is ApprovalState.USED
    assert states[other] is ApprovalState.PENDING

    if "://" not in journal:  # an SQLite file: no byte of the arguments anywhere in it (nor in its WAL)
        stored = b"".join(path.read_bytes() for path in tmp_path.glob("j.db*") if path.is_file())
        assert b"send_email" in stored  # the scan reads the journal's real bytes
        # (The result "sent to bob@example.com" is journaled as it came: redaction is of arguments.)
        for secret in (b"98765", b"12345", b"eve@example.com"):
            assert secret not in stored, secret
