"""Both protocol eras through the proxy with the official SDK client, including multi-round tools/call."""

from __future__ import annotations

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

from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT

from support import done_count, journal_calls, server_cmd

MODES = ["legacy", "2026-07-28"]


def proxy_params(journal: str, tmp_path: Path, server: str = "elicit_server.py") -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "checkpoint_mcp", "--upstream-cmd", server_cmd(server), "--journal", journal],
        env={**os.environ, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


async def accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


def journal_rows(journal: str) -> list:
    return journal_calls(journal, default_workflow_id(journal))


def connect(journal: str, tmp_path: Path, mode: str) -> Client:
    client_mode = "auto" if mode == "2026-07-28" else mode
    return Client(proxy_params(journal, tmp_path), mode=client_mode, elicitation_callback=accept)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_that_asks_the_user_is_one_journal_entry_in_both_eras(journal: str, tmp_path: Path, mode: str) -> None:
    async def main() -> Any:
        async with connect(journal, tmp_path, mode) as client:
            with anyio.fail_after(20):
                result = await client.call_tool("send_gift", {"to": "ann"})
            assert client.session.protocol_version == ("2026-07-28" if mode != "legacy" else "2025-11-25")
            return result

    result = anyio.run(main)
    assert result.content[0].text == "gift sent to ann"
    assert result.meta is not None
    assert result.meta["checkpoint/journal"] == {"workflow": default_workflow_id(journal), "seq": 1, "replayed": False}
    [row] = journal_rows(journal)
    assert (row.seq, row.tool, row.state) == (1, "send_gift", CallState.COMPLETED)
    assert done_count(tmp_path / "effects.jsonl") == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_completed_multi_round_call_replays_without_asking_again(journal: str, tmp_path: Path, mode: str) -> None:
    asked: list[str] = []

    async def counting(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def run(meta: Any) -> types.CallToolResult:
        client_mode = "auto" if mode == "2026-07-28" else mode
        async with Client(proxy_params(journal, tmp_path), mode=client_mode, elicitation_callback=counting) as client:
            with anyio.fail_after(20):
                return await client.call_tool("send_gift", {"to": "bob"}, meta=meta)

    first = anyio.run(run, {"checkpoint_seq": 1})
    again = anyio.run(run, {"checkpoint_seq": 1})
    assert asked == ["Send a gift to bob?"]  # the replay did not reach the upstream, so nobody was asked
    assert again.content[0].text == first.content[0].text
    assert again.meta is not None
    assert again.meta["checkpoint/journal"]["replayed"] is True
    assert done_count(tmp_path / "effects.jsonl") == 1


def test_the_first_round_of_a_multi_round_call_is_not_a_completion(journal: str, tmp_path: Path) -> None:
    async def first_round_only() -> Any:
        async with Client(proxy_params(journal, tmp_path), mode="2026-07-28", elicitation_callback=accept) as client:
            await client.list_tools()
            with anyio.fail_after(20):
                return await client.session.call_tool(
                    "send_gift", {"to": "cy"}, meta={"checkpoint_seq": 1}, allow_input_required=True
                )

    first = anyio.run(first_round_only)
    assert isinstance(first, types.InputRequiredResult)
    assert first.meta is not None
    assert first.meta["checkpoint/journal"]["seq"] == 1
    # The agent went away between the rounds: the call is still PENDING, so a replay is in doubt.
    [row] = journal_rows(journal)
    assert row.state is CallState.PENDING

    async def retry() -> None:
        async with Client(proxy_params(journal, tmp_path), mode="2026-07-28", elicitation_callback=accept) as client:
            with pytest.raises(MCPError) as refused, anyio.fail_after(20):
                await client.call_tool("send_gift", {"to": "cy"}, meta={"checkpoint_seq": 1})
            assert refused.value.code == IN_DOUBT

    anyio.run(retry)
    assert done_count(tmp_path / "effects.jsonl") == 0
