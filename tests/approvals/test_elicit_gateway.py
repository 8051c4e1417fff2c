"""`approve = "elicit"` through `checkpoint serve`: the official SDK client over Streamable HTTP is asked on the
stream of its call, and its answer decides the call there."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from test_elicit import MAIL, POLICY, User, approvals

from checkpoint_mcp.intercept.approval_gate import ELICITED_BY
from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.refusals import APPROVAL_REQUIRED
from gatewayproc import GatewayProcess

from support import done_count, server_cmd


def test_a_gateway_client_who_accepts_runs_the_call_once_and_one_who_declines_does_not(
    journal: str, tmp_path: Path
) -> None:
    rules = tmp_path / "policy.toml"
    rules.write_text(POLICY, encoding="utf-8")
    effects = tmp_path / "effects.jsonl"
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--policy", str(rules)]

    async def call(user: User, to: str) -> object:
        async with Client(gateway.url, mode="legacy", elicitation_callback=user) as client:
            with anyio.fail_after(30):
                try:
                    return await client.call_tool("send_email", {**MAIL, "to": to})
                except MCPError as refused:
                    return refused

    with GatewayProcess(*argv, env={"EFFECTS_FILE": str(effects)}) as gateway:
        accepting, declining = User("accept"), User("decline")
        ran = anyio.run(call, accepting, "ann@example.com")
        refused = anyio.run(call, declining, "eve@example.com")
    assert not isinstance(ran, MCPError), ran
    assert isinstance(refused, MCPError)
    assert (refused.code, refused.error.data["reason"]) == (APPROVAL_REQUIRED, "awaiting_approval")
    assert len(accepting.asked) == len(declining.asked) == 1
    assert done_count(effects, "send_email") == 1
    waiting, used = approvals(journal)  # newest first
    assert (used.state, used.decided_by) == (ApprovalState.USED, ELICITED_BY)
    assert (waiting.state, waiting.decided_by) == (ApprovalState.PENDING, None)  # left to an operator
