"""The official SDK client against a server, directly and through `checkpoint --upstream-url`: what each saw.

Differential tests over HTTP compare the two records: the same answers, notifications and server-to-client
requests, results differing only by the journal's ``_meta`` key.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from httpservers import HttpServer


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def strip_journal_meta(result: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    meta = dict(result.get("_meta") or {})
    info = meta.pop("checkpoint/journal", None)
    out = {**result, "_meta": meta} if meta else {k: v for k, v in result.items() if k != "_meta"}
    return out, info is not None


async def record_session(server: Any, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Connect the official SDK client to ``server`` (a URL, or stdio parameters), list the tools, make ``calls``;
    what it saw: the version, the handshake, the tools, the results, and every notification and server request.
    """
    seen: dict[str, list[Any]] = {"log": [], "progress": [], "elicit": [], "sampling": [], "roots": []}

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen["log"].append(dump(params))

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        seen["elicit"].append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen["sampling"].append(dump(params.messages[0].content))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="forty-two"), model="test-model"
        )

    async def on_roots(context: Any) -> types.ListRootsResult:
        seen["roots"].append(True)
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen["progress"].append((progress, total, message))

    legacy = mode == "legacy"
    client = Client(
        server,
        mode="auto" if mode == "2026-07-28" else mode,
        logging_callback=on_log,
        log_level="info",
        elicitation_callback=on_elicit,
        sampling_callback=on_sampling if legacy else None,
        list_roots_callback=on_roots if legacy else None,
    )
    async with client:
        session = client.session
        with anyio.fail_after(60):
            tools = await client.list_tools()
            results = [dump(await client.call_tool(name, args, progress_callback=on_progress)) for name, args in calls]
        handshake = session.initialize_result or session.discover_result
        return {
            "version": session.protocol_version,
            "handshake": dump(handshake),
            "tools": dump(tools),
            "results": results,
            "seen": seen,
        }


def through_proxy(server: HttpServer, journal: str, name: str, version: str) -> StdioServerParameters:
    args = ["-m", "checkpoint_mcp", "--upstream-url", server.url, "--journal", journal]
    return StdioServerParameters(command=sys.executable, args=[*args, "--name", name, "--version", version])


def compare(server: HttpServer, mode: str, calls: list[tuple[str, dict[str, Any]]], journal: str) -> dict[str, Any]:
    """Run ``calls`` directly, then through the proxy (with the server's own name and version); both must see
    the same, up to the journal's ``_meta`` key on results. The proxied record."""
    direct = anyio.run(record_session, server.url, mode, calls)
    handshake = direct["handshake"]
    info = handshake.get("serverInfo") or handshake["_meta"]["io.modelcontextprotocol/serverInfo"]
    proxied = anyio.run(record_session, through_proxy(server, journal, info["name"], info["version"]), mode, calls)
    assert proxied["version"] == direct["version"]
    assert proxied["handshake"] == direct["handshake"]
    assert proxied["tools"] == direct["tools"]
    for mine, theirs in zip(proxied["results"], direct["results"], strict=True):
        stripped, journaled = strip_journal_meta(mine)
        assert journaled, "every tools/call result through the proxy carries the journal's _meta"
        assert stripped == theirs
    assert proxied["seen"] == direct["seen"]
    return proxied
