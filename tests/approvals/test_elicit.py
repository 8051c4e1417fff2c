"""`approve = "elicit"`: the proxy asks the client's user in the same request (the official SDK client, with an
elicitation callback, over stdio to a real proxy in front of the effects server), and falls back to the operator
path where the client cannot be asked or does not answer yes or no."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from checkpoint_mcp.intercept.approval_gate import ELICITED_BY
from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from support import approval_requests, done_count, server_cmd

MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": 'ünïcode, "quotes"'}
POLICY = '[tools.send_email]\napprove = "elicit"\n'
MODES = ["legacy", "auto"]


def proxy(journal: str, tmp_path: Path, server: str, tool: str) -> StdioServerParameters:
    rules = tmp_path / "policy.toml"
    rules.write_text(POLICY.replace("send_email", tool), encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd(server), "--journal", journal, "--policy", str(rules)]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "checkpoint_mcp", *argv],
        env={**os.environ, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


class User:
    """The client's user: answers every elicitation with ``action``, and remembers what it was asked."""

    def __init__(self, action: str) -> None:
        self.action = action
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action=self.action, content={"ok": True} if self.action == "accept" else None)


def call(
    journal: str,
    tmp_path: Path,
    user: User | None,
    arguments: dict[str, Any] = MAIL,
    mode: str = "legacy",
    server: str = "effects_server.py",
    tool: str = "send_email",
) -> Any:
    """One call through a fresh proxy, from a client that can be asked (``user``) or cannot, in ``mode``
    ("legacy": 2025-11-25, asked by our elicitation/create; "auto": 2026-07-28, asked by an input_required round);
    the result, or the MCPError it was refused with."""

    async def main() -> Any:
        kwargs: dict[str, Any] = {"elicitation_callback": user} if user is not None else {}
        async with Client(proxy(journal, tmp_path, server, tool), mode=mode, **kwargs) as client:
            with anyio.fail_after(30):
                try:
                    return await client.call_tool(tool, arguments)
                except MCPError as refused:
                    return refused

    return anyio.run(main)


def approvals(journal: str) -> list[Approval]:
    return approval_requests(journal)


def sent(tmp_path: Path) -> int:
    return done_count(tmp_path / "effects.jsonl", "send_email")


def test_a_user_who_accepts_runs_the_call_once_in_the_same_request(journal: str, tmp_path: Path) -> None:
    user = User("accept")
    result = call(journal, tmp_path, user)
    assert not isinstance(result, MCPError), result
    assert result.is_error is not True
    assert sent(tmp_path) == 1
    [asked] = user.asked
    assert "'send_email'" in asked.message
    shown = asked.message.split("arguments:\n", 1)[1].rsplit("\nAccept", 1)[0]
    assert json.loads(shown) == MAIL  # the exact arguments, as JSON
    assert asked.requested_schema == {"type": "object", "properties": {}}
    [approval] = approvals(journal)
    assert approval.state is ApprovalState.USED
    assert approval.decided_by == ELICITED_BY
    assert approval.workflow == default_workflow_id(journal)
    assert f"approval #{approval.id}" in asked.message
    assert approval.used_seq == result.meta["checkpoint/journal"]["seq"]
    # The approval covered that one call: the same call again asks again, and declined, does not run.
    again = call(journal, tmp_path, User("decline"))
    assert isinstance(again, MCPError)
    assert sent(tmp_path) == 1


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_user_who_declines_or_cancels_leaves_the_call_to_an_operator(
    journal: str, tmp_path: Path, action: str
) -> None:
    """Not a denial: a headless client (`claude -p`) declines every elicitation by itself."""
    refused = call(journal, tmp_path, User(action))
    assert isinstance(refused, MCPError)
    assert refused.code == APPROVAL_REQUIRED
    assert refused.error.data["reason"] == "awaiting_approval"
    assert "checkpoint journal approve" in refused.error.message
    [approval] = approvals(journal)
    assert (approval.state, approval.decided_by) == (ApprovalState.PENDING, None)
    assert sent(tmp_path) == 0
    # Sent again, the same call asks about the same request; accepted, it runs.
    user = User("accept")
    assert not isinstance(call(journal, tmp_path, user), MCPError)
    assert f"approval #{approval.id}" in user.asked[0].message
    [used] = approvals(journal)
    assert (used.id, used.state, used.decided_by) == (approval.id, ApprovalState.USED, ELICITED_BY)
    assert sent(tmp_path) == 1


def test_a_client_without_elicitation_gets_the_operator_refusal(journal: str, tmp_path: Path) -> None:
    refused = call(journal, tmp_path, None)
    assert isinstance(refused, MCPError)
    assert refused.code == APPROVAL_REQUIRED
    assert refused.error.data["reason"] == "awaiting_approval"
    assert "checkpoint journal approve" in refused.error.message
    [approval] = approvals(journal)
    assert approval.state is ApprovalState.PENDING
    assert sent(tmp_path) == 0


def test_different_arguments_need_their_own_answer(journal: str, tmp_path: Path) -> None:
    assert not isinstance(call(journal, tmp_path, User("accept")), MCPError)
    other = {**MAIL, "to": "eve@example.com"}
    user = User("decline")
    assert isinstance(call(journal, tmp_path, user, other), MCPError)
    assert "eve@example.com" in user.asked[0].message
    assert sent(tmp_path) == 1


@pytest.mark.parametrize("mode", MODES)
def test_both_eras_ask_for_the_approval_before_the_server_asks_its_own_question(
    journal: str, tmp_path: Path, mode: str
) -> None:
    """2026-07-28: our question is an input_required round of its own (the retry carries the user's answer and is
    sent upstream without it); then the server's own round passes through, and the call completes once."""
    user = User("accept")
    result = call(journal, tmp_path, user, {"to": "ann"}, mode, "elicit_server.py", "send_gift")
    assert not isinstance(result, MCPError), result
    assert result.content[0].text == "gift sent to ann"
    first, second = (asked.message for asked in user.asked)
    assert "'send_gift'" in first
    assert second == "Send a gift to ann?"
    [approval] = approvals(journal)
    assert (approval.state, approval.decided_by) == (ApprovalState.USED, ELICITED_BY)
    assert approval.used_seq == result.meta["checkpoint/journal"]["seq"]
    assert done_count(tmp_path / "effects.jsonl", "send_gift") == 1
    declining = User("decline")
    refused = call(journal, tmp_path, declining, {"to": "bob"}, mode, "elicit_server.py", "send_gift")
    assert isinstance(refused, MCPError)
    assert refused.error.data["reason"] == "awaiting_approval"
    assert len(declining.asked) == 1  # ours: the server was never asked
    assert done_count(tmp_path / "effects.jsonl", "send_gift") == 1
