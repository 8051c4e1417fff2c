"""Two sessions of the real Claude Code CLI at once in one project after a plain `checkpoint init` (issue 42), each
headless against its own scripted model on loopback (FACTS.md). Terminal B sends Bob his invoice and stays in its
session; meanwhile terminal A sends Ann hers, and terminal A starts again (a new `claude`, as after a /clear or a
crash) and sends Ann's invoice once more; then B sends Bob a second invoice, on purpose.

Both sessions have their servers connected (neither is locked out), every call is journaled, A's new session's
repeat is caught, and A's new session does not change what B may repeat: B's own second send runs. The outbox is
the truth: Ann one e-mail, Bob two."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from scripted_model import ScriptedModel, ToolCall

from .claude_project import SEND, Project, mail_project, session
from support import journal_calls, wait_until

ANN = {"to": "ann@example.com", "subject": "Your invoice", "body": "Hi Ann, your invoice is attached."}
BOB = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}


def connected(stream: str) -> dict[str, str]:
    """The status of each MCP server in a stream-json session's init message."""
    for line in stream.splitlines():
        if line.startswith("{"):
            message = json.loads(line)
            if message.get("type") == "system" and message.get("subtype") == "init":
                return {server["name"]: server["status"] for server in message.get("mcp_servers", [])}
    raise AssertionError(f"no init message in the session's output: {stream[-2000:]}")


def sent_to(project: Project, to: str) -> int:
    return sum(1 for mail in project.sent() if mail["to"] == to)


@pytest.mark.timeout(300)
def test_two_claude_code_sessions_at_once_have_their_servers_and_one_restarting_leaves_the_others_repeats_running(
    tmp_path: Path,
) -> None:
    project = mail_project(tmp_path)
    go_on = threading.Event()
    b_model = ScriptedModel([ToolCall(SEND, BOB), ToolCall(SEND, BOB, after=go_on)])
    outputs: dict[str, str] = {}
    failures: list[BaseException] = []

    def terminal_b() -> None:
        try:
            outputs["b"] = session(project, b_model)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    b = threading.Thread(target=terminal_b)
    b.start()
    try:
        wait_until(lambda: sent_to(project, BOB["to"]) == 1 or bool(failures), 120, "terminal B's first send")
        assert not failures, failures
        a_model = ScriptedModel([ToolCall(SEND, ANN)])
        outputs["a"] = session(project, a_model)
        restarted = ScriptedModel([ToolCall(SEND, ANN)])
        outputs["a again"] = session(project, restarted)
    finally:
        go_on.set()  # B's own second send to Bob, after A's new session started
        b.join(timeout=240)
    assert not failures, failures
    assert not b.is_alive()

    for name in ("a", "a again", "b"):
        assert connected(outputs[name]).get("mailbox") == "connected", (name, connected(outputs[name]))
    caught = restarted.tool_results()[-1]
    assert caught.startswith("ERROR: "), caught
    assert "already ran" in caught, caught
    assert not any(result.startswith("ERROR") for result in b_model.tool_results()), b_model.tool_results()
    assert sent_to(project, ANN["to"]) == 1, project.sent()  # no side effect done twice
    assert sent_to(project, BOB["to"]) == 2, project.sent()  # no legitimate repeat refused
    rows = journal_calls(str(project.path / ".checkpoint" / "journal.db"), "mailbox")
    assert sorted(json.loads(row.arguments)["to"] for row in rows) == [ANN["to"], BOB["to"], BOB["to"]]
    assert all(row.state is CallState.COMPLETED for row in rows)
