"""Real servers behind `checkpoint init`: the official SDK client gets the same tools/list through each wrapped
entry as through the original one, and a call through a wrapped entry is journaled."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from checkpoint_mcp.journal.base import CallState

from .entries import run_init, stdio_params
from .realproject import HTTP_TOKEN, make_project
from httpservers import HttpServer, sdk_server
from support import journal_calls

ENVIRON = {**os.environ, "HTTP_TOKEN": HTTP_TOKEN}


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    with sdk_server(tmp_path) as server:
        yield server


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def tools_and_call(target: Any, call: tuple[str, dict[str, Any]] | None) -> tuple[Any, Any]:
    async with Client(target, mode="legacy") as client:
        with anyio.fail_after(60):
            tools = dump(await client.list_tools())
            result = dump(await client.call_tool(*call)) if call else None
    return tools, result


@pytest.fixture
def initialized(tmp_path: Path, http_server: HttpServer) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The real project after `checkpoint init`: its folder, the original entries and the wrapped ones."""
    project = make_project(tmp_path, http_server.url)
    original = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    done = run_init("--project", str(project), env=ENVIRON)
    assert done.returncode == 0, done.stderr
    wrapped = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert set(wrapped) == {*original, "checkpoint-session"}
    return project, original, wrapped


@pytest.mark.parametrize("name", ["everything", "time", "git", "remote"])
def test_a_wrapped_entry_lists_the_same_tools_as_the_original(
    initialized: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path, name: str
) -> None:
    _, original, wrapped = initialized
    elsewhere = tmp_path / "elsewhere"  # the command must run from any folder the client starts it in
    elsewhere.mkdir()
    entry = original[name]
    direct, _ = anyio.run(
        tools_and_call, entry["url"] if "url" in entry else stdio_params(entry, ENVIRON, elsewhere), None
    )
    through, _ = anyio.run(tools_and_call, stdio_params(wrapped[name], ENVIRON, elsewhere), None)
    assert direct["tools"]
    assert through == direct


def test_calls_through_wrapped_entries_are_journaled_one_workflow_per_server(
    initialized: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    project, _, wrapped = initialized
    journal = str(project / ".checkpoint" / "journal.db")
    call = ("get_current_time", {"timezone": "UTC"})
    _, result = anyio.run(tools_and_call, stdio_params(wrapped["time"], ENVIRON, tmp_path), call)
    assert result["_meta"]["checkpoint/journal"] == {"workflow": "time", "seq": 1, "replayed": False}
    [row] = journal_calls(journal, "time")
    assert (row.tool, row.state) == ("get_current_time", CallState.COMPLETED)

    call = ("send_email", {"to": "ann@example.com", "subject": "hi"})
    _, result = anyio.run(tools_and_call, stdio_params(wrapped["remote"], ENVIRON, tmp_path), call)
    assert result["content"][0]["text"] == "sent to ann@example.com"
    [row] = journal_calls(journal, "remote")
    assert (row.tool, row.state) == ("send_email", CallState.COMPLETED)
    effects = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert [e["tool"] for e in effects if e["event"] == "done"] == ["send_email"]
