"""--trust-annotations, --redact-args-in-journal and cancellation, through real processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS, CallState
from checkpoint_mcp.refusals import DIVERGENCE, IN_DOUBT

from support import ProxyProcess, done_count, journal_calls, read_effects, server_cmd, wait_until


def start(journal: str, tmp_path: Path, *extra: str) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        journal,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def journal_rows(journal: str) -> list:
    return journal_calls(journal, default_workflow_id(journal))


def test_trusted_read_only_tools_are_forwarded_without_journaling(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path, "--trust-annotations") as p:
        before_listing = p.call("lookup", {"key": "a"})  # annotations unknown yet: journaled
        p.request("tools/list")
        after_listing = p.call("lookup", {"key": "b"})
        destructive = p.call("send_email", {"to": "x"})
        p.close()
    assert before_listing["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert "_meta" not in after_listing["result"]
    assert destructive["result"]["_meta"]["checkpoint/journal"]["seq"] == 2
    assert [(r.seq, r.tool) for r in journal_rows(journal)] == [(1, "lookup"), (2, "send_email")]


def test_without_trust_read_only_tools_are_journaled_too(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.request("tools/list")
        reply = p.call("lookup", {"key": "b"})
        p.close()
    assert reply["result"]["_meta"]["checkpoint/journal"]["seq"] == 1


def journal_files(journal: str, tmp_path: Path, request: pytest.FixtureRequest) -> list[Path]:
    """Every file the journal's data can be in: the SQLite file with its WAL, or the whole PostgreSQL cluster."""
    if journal.startswith("postgresql://"):
        return [f for f in request.getfixturevalue("pg_server").data.rglob("*") if f.is_file()]
    return [f for f in tmp_path.iterdir() if f.name.startswith("j.db") and f.is_file()]


def contents_of(files: list[Path]) -> bytes:
    """The bytes of ``files``, read now. A running PostgreSQL removes some of its files as it goes (its relation
    cache's ``pg_internal.init``, temporary files): one gone between the listing and the read holds nothing now."""
    found = []
    for file in files:
        try:
            found.append(file.read_bytes())
        except FileNotFoundError:
            continue
    return b"".join(found)


def test_redacted_arguments_never_reach_the_journal_files_but_divergence_is_still_caught(
    journal: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    secret = "hunter2-very-secret-recipient@example.com"
    with start(journal, tmp_path, "--redact-args-in-journal") as p:
        # Tools that do not echo their arguments: results are journaled as the upstream wrote them.
        p.call("send_quiet", {"to": secret, "subject": "s3cr3t-subject"}, seq=1)
        p.call("fail_quiet", {"reason": "another-secret-reason"}, seq=2)
        diverged = p.call("send_quiet", {"to": "someone-else", "subject": "s3cr3t-subject"}, seq=1)
        # Look at the files while the proxy still has them open: the WAL holds the recent commits.
        files = journal_files(journal, tmp_path, request)
        assert journal.startswith("postgresql://") or any(f.name == "j.db-wal" for f in files)
        contents = contents_of(files)
        p.close()
    contents += contents_of(journal_files(journal, tmp_path, request))
    for needle in (secret, "s3cr3t-subject", "another-secret-reason", "hunter2"):
        assert needle.encode() not in contents
    assert diverged["error"]["code"] == DIVERGENCE
    assert "arguments" not in diverged["error"]["data"]["journaled"]
    assert "arguments" not in diverged["error"]["data"]["received"]
    assert all(row.arguments == REDACTED_ARGUMENTS for row in journal_rows(journal))


def test_a_cancelled_call_that_still_answers_is_journaled_as_usual(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 0.3}},
            }
        )
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}})
        reply = p.response(1)  # the test upstream ignores cancellation and answers anyway
        p.close()
    assert "result" in reply
    [row] = journal_rows(journal)
    assert row.state is CallState.COMPLETED


def test_a_cancelled_call_that_never_answers_stays_in_doubt(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        p.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        wait_until(lambda: len(read_effects(tmp_path / "effects.jsonl")) == 1, what="hang started")
        started = time.monotonic()
        assert p.close() == 0
        # A cancelled call is not waited for at shutdown: the client no longer expects its answer.
        assert time.monotonic() - started < 8
    [row] = journal_rows(journal)
    assert row.state is CallState.PENDING
    with start(journal, tmp_path) as p:
        again = p.call("hang", {}, seq=1)
        p.close()
    assert again["error"]["code"] == IN_DOUBT
    assert done_count(tmp_path / "effects.jsonl") == 0
