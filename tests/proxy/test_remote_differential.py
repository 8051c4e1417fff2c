"""Differential tests over real HTTP: the official SDK client talks to a real Streamable HTTP server directly,
then through `checkpoint --upstream-url` over stdio; both must see the same answers, notifications and
server-to-client requests (sampling, elicitation, roots), in both protocol eras. Results differ only by the
journal's ``_meta`` key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from httpservers import HttpServer, sdk_server
from support import done_count

MODES = ["legacy", "2026-07-28"]


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _strip_journal_meta(result: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    meta = dict(result.get("_meta") or {})
    info = meta.pop("checkpoint/journal", None)
    out = {**result, "_meta": meta} if meta else {k: v for k, v in result.items() if k != "_meta"}
    return out, info is not None


async def _session(server: Any, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    seen: dict[str, list[Any]] = {"log": [], "progress": [], "elicit": [], "sampling": [], "roots": []}

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen["log"].append(_dump(params))

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult:
        seen["elicit"].append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async def on_sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        seen["sampling"].append(_dump(params.messages[0].content))
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
            results = [_dump(await client.call_tool(name, args, progress_callback=on_progress)) for name, args in calls]
        handshake = session.initialize_result or session.discover_result
        return {
            "version": session.protocol_version,
            "handshake": _dump(handshake),
            "tools": _dump(tools),
            "results": results,
            "seen": seen,
        }


def _proxy(server: HttpServer, journal: str, tmp_path: Path, name: str, version: str) -> StdioServerParameters:
    args = ["-m", "checkpoint_mcp", "--upstream-url", server.url, "--journal", journal]
    return StdioServerParameters(command=sys.executable, args=[*args, "--name", name, "--version", version])


def _compare(
    server: HttpServer, mode: str, calls: list[tuple[str, dict[str, Any]]], journal: str, tmp_path: Path
) -> dict[str, Any]:
    direct = anyio.run(_session, server.url, mode, calls)
    proxied = anyio.run(_session, _proxy(server, journal, tmp_path, "http-effects", "3.1.0"), mode, calls)
    assert proxied["version"] == direct["version"] == ("2026-07-28" if mode == "2026-07-28" else "2025-11-25")
    assert proxied["handshake"] == direct["handshake"]
    assert proxied["tools"] == direct["tools"]
    for mine, theirs in zip(proxied["results"], direct["results"], strict=True):
        stripped, journaled = _strip_journal_meta(mine)
        assert journaled, "every tools/call result through the proxy carries the journal's _meta"
        assert stripped == theirs
    assert proxied["seen"] == direct["seen"]
    return proxied


@pytest.mark.parametrize("flavour", ["sse", "json"])
@pytest.mark.parametrize("mode", MODES)
def test_an_sdk_server_over_streamable_http_answers_the_same_through_the_proxy(
    journal: str, tmp_path: Path, mode: str, flavour: str
) -> None:
    calls = [("send_email", {"to": "ann@example.com", "subject": "hello"}), ("progress", {"steps": 3})]
    # A JSON-only server of the handshake era has no stream to ask the client on; in 2026-07-28 a question is an
    # input_required result, which needs none.
    asks = flavour == "sse" or mode != "legacy"
    if asks:
        calls.append(("confirm_gift", {"to": "bob"}))
    if mode == "legacy" and asks:
        calls += [("ask_model", {"question": "six times seven?"}), ("list_client_roots", {})]
    flags = ["--json"] if flavour == "json" else []
    with sdk_server(tmp_path, *flags) as server:
        proxied = _compare(server, mode, calls, journal, tmp_path)
    seen = proxied["seen"]
    assert seen["elicit"] == (["Send a gift to bob?"] if asks else [])
    if mode == "legacy" and asks:
        assert seen["sampling"] == [{"type": "text", "text": "six times seven?"}]
        assert seen["roots"] == [True]
        assert [entry["data"] for entry in seen["log"]] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    if flavour == "sse":
        assert [step for step, _, _ in seen["progress"]] == [1, 2, 3]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2  # once directly, once through the proxy
