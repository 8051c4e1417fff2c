"""Differential: the official SDK client, in both protocol eras, directly on a server vs through `checkpoint serve`."""

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

from gatewayproc import GatewayProcess

import nodetools
from support import done_count, server_cmd

MODES = ["legacy", "2026-07-28"]


async def accept(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


def without_meta(value: Any) -> Any:
    """A result as JSON, without the `_meta` members Checkpoint and the server add."""
    if isinstance(value, dict):
        return {k: without_meta(v) for k, v in value.items() if k not in ("_meta", "meta")}
    if isinstance(value, list):
        return [without_meta(v) for v in value]
    return value


async def session_facts(target: Any, mode: str) -> dict[str, Any]:
    async with Client(target, mode=mode, elicitation_callback=accept) as client:
        with anyio.fail_after(30):
            tools = await client.list_tools()
            result = await client.call_tool("send_gift", {"to": "ann"})
            version = client.session.protocol_version
    return {
        "version": version,
        "tools": without_meta(tools.model_dump(mode="json", exclude_none=True)),
        "result": without_meta(result.model_dump(mode="json", exclude_none=True)),
        "meta": result.meta,
    }


@pytest.mark.parametrize("mode", MODES)
def test_an_sdk_client_sees_the_same_server_directly_and_through_the_gateway(tmp_path: Path, mode: str) -> None:
    effects = tmp_path / "effects.jsonl"
    direct_params = StdioServerParameters(
        command=sys.executable,
        args=[str(Path(__file__).parent.parent / "servers" / "elicit_server.py")],
        env={**os.environ, "EFFECTS_FILE": str(effects)},
    )
    direct = anyio.run(session_facts, direct_params, mode)
    journal = str(tmp_path / "j.db")
    with GatewayProcess(
        "--upstream-cmd", server_cmd("elicit_server.py"), "--journal", journal, env={"EFFECTS_FILE": str(effects)}
    ) as gateway:
        through = anyio.run(session_facts, gateway.url, mode)
    assert through["version"] == direct["version"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert through["tools"] == direct["tools"]
    assert through["result"] == direct["result"]
    assert through["meta"]["checkpoint/journal"] == {"workflow": journal, "seq": 1, "replayed": False}
    assert done_count(effects) == 2  # once directly, once through the gateway


def test_server_everything_lists_and_calls_the_same_through_the_gateway(tmp_path: Path) -> None:
    command = [*nodetools.package_bin("@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"]

    async def facts(target: Any) -> dict[str, Any]:
        async with Client(target, mode="legacy") as client:
            with anyio.fail_after(30):
                tools = await client.list_tools()
                prompts = await client.list_prompts()
                resources = await client.list_resources()
                echo = await client.call_tool("echo", {"message": "héllo ✓"})
                total = await client.call_tool("get-sum", {"a": 2, "b": 40})
        return {
            "tools": sorted(t.name for t in tools.tools),
            "prompts": sorted(p.name for p in prompts.prompts),
            "resources": len(resources.resources),
            "echo": without_meta(echo.model_dump(mode="json", exclude_none=True)),
            "sum": without_meta(total.model_dump(mode="json", exclude_none=True)),
        }

    direct = anyio.run(facts, StdioServerParameters(command=command[0], args=command[1:], env=nodetools.env()))
    shell_command = " ".join(command)
    with GatewayProcess(
        "--upstream-cmd", shell_command, "--journal", str(tmp_path / "j.db"), env=nodetools.env()
    ) as gateway:
        through = anyio.run(facts, gateway.url)
    assert through == direct
    assert "héllo ✓" in str(through["echo"])
