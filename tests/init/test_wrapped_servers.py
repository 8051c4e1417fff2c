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
from mcp.shared.exceptions import MCPError

from checkpoint_mcp.intercept.policy import Repeat, load_policy
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import REPEAT_REFUSED

from .entries import run_init, stdio_params
from .policy_text import comments
from .realproject import HTTP_TOKEN, VENV_BIN, make_project
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


async def refused_code(target: Any, call: tuple[str, dict[str, Any]]) -> int:
    """The JSON-RPC error code a call is refused with."""
    async with Client(target, mode="legacy") as client:
        with anyio.fail_after(60):
            try:
                await client.call_tool(*call)
            except MCPError as exc:
                return exc.code
    raise AssertionError(f"{call[0]} was not refused")


@pytest.fixture
def initialized(tmp_path: Path, http_server: HttpServer) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The real project after `checkpoint init`: its folder, the original entries and the wrapped ones."""
    project = make_project(tmp_path, http_server.url)
    original = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    done = run_init("--project", str(project), env=ENVIRON)
    assert done.returncode == 0, done.stderr
    (tmp_path / "summary.txt").write_text(done.stderr)
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
    for _ in range(2):  # readOnlyHint: init's policy leaves it unjournaled, so a second read reads afresh
        _, result = anyio.run(tools_and_call, stdio_params(wrapped["time"], ENVIRON, tmp_path), call)
        assert "UTC" in result["content"][0]["text"]
        assert "checkpoint/journal" not in result.get("_meta", {})
    assert journal_calls(journal, "time") == []

    call = ("send_email", {"to": "ann@example.com", "subject": "hi"})
    _, result = anyio.run(tools_and_call, stdio_params(wrapped["remote"], ENVIRON, tmp_path), call)
    assert result["content"][0]["text"] == "sent to ann@example.com"
    [row] = journal_calls(journal, "remote")
    assert (row.tool, row.state) == ("send_email", CallState.COMPLETED)
    # A new session (after a crash or a /clear) sends the same e-mail again: no hints, so init's policy refuses it.
    code = anyio.run(refused_code, stdio_params(wrapped["remote"], ENVIRON, tmp_path), call)
    assert code == REPEAT_REFUSED
    effects = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert [e["tool"] for e in effects if e["event"] == "done"] == ["send_email"]


def test_init_writes_each_server_an_active_policy_from_what_it_says_of_its_tools(
    initialized: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    project, original, wrapped = initialized
    folder = project / ".checkpoint" / "policies"
    assert sorted(p.name for p in folder.iterdir()) == [f"{name}.toml" for name in sorted(original)]
    for name in original:
        args = wrapped[name]["args"]
        assert args[args.index("--policy") + 1] == str(folder / f"{name}.toml")
    text = {name: (folder / f"{name}.toml").read_text() for name in original}
    rules = {name: load_policy(folder / f"{name}.toml") for name in original}

    assert (
        "# readOnlyHint: it only reads, so it is not journaled. Arguments: message.\n[tools.echo]\n"
        in text["everything"]
    )
    assert not rules["everything"].rule_for("echo").journal
    assert not rules["time"].rule_for("convert_time").journal
    assert "Arguments: source_timezone, time,\n# target_timezone." in text["time"]
    # mcp-server-git is recognised (its serverInfo and tools): its reviewed profile decides, and says so.
    assert "the reviewed profile of mcp-server-git 2026.10.19" in comments(text["git"])
    assert "# Reviewed: stages files (idempotentHint): staging them again changes nothing more." in text["git"]
    assert rules["git"].rule_for("git_add").idempotent
    commit = rules["git"].rule_for("git_commit")
    assert (commit.journal, commit.repeat) == (True, Repeat.ALLOW), "a second commit after new changes runs"
    assert (
        "# no hints: taken as destructive, not idempotent (review: does it only read?). The same call from a later session is\n"
        "# refused within 24h; within one session it runs. Arguments: to, subject.\n"
        '[tools.send_email]\nrepeat = "refuse"\nwindow = "24h"\nwithin_session = "run"\n'
    ) in text["remote"]
    assert "match = [" in text["remote"]
    assert "ignore = [" in text["remote"], "the header names the keys that narrow what a repeat compares"
    summary = (tmp_path / "summary.txt").read_text()
    assert f"wrote 4 active policies in {folder}" in summary
    assert "review first: remote's tools send_email, " in summary
    [git_row] = [line for line in summary.splitlines() if line.startswith("  git ")]
    assert git_row.split()[1:6] == ["12", "7", "0", "5", "0"], "12 tools: 7 read, 5 repeats run, none protected"
    assert git_row.endswith("profile mcp-server-git 2026.10.19")
    assert "--- " not in summary
    assert "review first: time" not in summary
    assert "warning" not in summary


def test_a_second_init_writes_only_the_new_servers_policies_keeps_every_edit_and_undo_is_exact(
    initialized: tuple[Path, dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    project, original, _ = initialized
    folder = project / ".checkpoint" / "policies"
    edited = (folder / "time.toml").read_text().replace("journal = false", 'repeat = "replay"', 1)
    (folder / "time.toml").write_text(edited)
    config = json.loads((project / ".mcp.json").read_text())
    config["mcpServers"]["later"] = {"command": str(VENV_BIN / "mcp-server-time")}
    config["mcpServers"]["broken"] = {"command": "sh", "args": ["-c", "exit 3"]}
    (project / ".mcp.json").write_text(json.dumps(config))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    mcp_before = (project / ".mcp.json").read_bytes()

    done = run_init("--project", str(project), env=ENVIRON)
    assert done.returncode == 0, done.stderr
    assert "; the project's journal): later, broken" in done.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in before} == before
    assert load_policy(folder / "later.toml").rule_for("get_current_time").journal is False
    broken = (folder / "broken.toml").read_text()
    assert "[tools." not in broken
    assert load_policy(folder / "broken.toml").default.repeat is Repeat.REFUSE
    assert "warning: broken could not be asked for its tools" in done.stderr
    assert "checkpoint policy suggest --upstream-cmd 'sh -c '\"'\"'exit 3'\"'\"'' --name broken" in done.stderr

    undone = run_init("--undo", "--project", str(project))
    assert undone.returncode == 0, undone.stderr
    # --undo goes back to before the first init; what was edited by hand in between is kept beside.
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"] == original
    [aside] = [p for p in project.iterdir() if p.name.startswith(".mcp.json.checkpoint-undo-")]
    assert aside.read_bytes() == mcp_before
    kept = {p.name.split(".checkpoint-undo-")[0]: p.read_bytes() for p in folder.iterdir()}
    assert kept == {"time.toml": edited.encode()}, "only the policy the user edited is kept, beside"
