"""Differential tests: real MCP servers from PyPI answer the same directly and through the journaling proxy.

The official SDK client drives `mcp-server-time` and `mcp-server-git` in both protocol eras, once directly and
once through `checkpoint` (with the upstream's own name and version, so even the handshake must match). Results
differ only by the journal's ``_meta`` key.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

BIN = Path(sys.executable).parent
FIXED_DATES = {"GIT_AUTHOR_DATE": "1767323045 +0000", "GIT_COMMITTER_DATE": "1767323045 +0000"}


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _strip_journal_meta(result: dict[str, Any]) -> dict[str, Any]:
    meta = dict(result.get("_meta") or {})
    info = meta.pop("checkpoint/journal", None)
    out = {**result, "_meta": meta} if meta else {k: v for k, v in result.items() if k != "_meta"}
    return {"result": out, "journaled": info is not None}


async def _session(params: StdioServerParameters, mode: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    async with Client(params, mode="auto" if mode == "2026-07-28" else mode) as client:
        session = client.session
        with anyio.fail_after(60):
            tools = await client.list_tools()
            results = [_dump(await client.call_tool(name, args)) for name, args in calls]
        handshake = session.initialize_result or session.discover_result
        return {
            "version": session.protocol_version,
            "handshake": _dump(handshake),
            "tools": _dump(tools),
            "results": results,
        }


def _compare(
    argv: list[str],
    mode: str,
    *,
    calls: list[tuple[str, dict[str, Any]]],
    env: dict[str, str],
    journal: str,
    prepare: Callable[[], None] = lambda: None,
) -> list[dict[str, Any]]:
    """Run ``calls`` directly, then through the proxy (``prepare`` before each run); both must answer the same."""
    prepare()
    direct = anyio.run(_session, StdioServerParameters(command=argv[0], args=argv[1:], env=env), mode, calls)
    handshake = direct["handshake"]
    info = handshake.get("serverInfo") or handshake["_meta"]["io.modelcontextprotocol/serverInfo"]
    proxy_args = ["-m", "checkpoint_mcp", "--upstream-cmd", shlex.join(argv), "--journal", journal]
    proxy_args += ["--name", info["name"], "--version", info["version"]]
    prepare()
    proxied = anyio.run(_session, StdioServerParameters(command=sys.executable, args=proxy_args, env=env), mode, calls)
    assert proxied["version"] == direct["version"] == ("2026-07-28" if mode == "2026-07-28" else "2025-11-25")
    assert proxied["handshake"] == direct["handshake"]
    assert proxied["tools"] == direct["tools"]
    for mine, theirs in zip(proxied["results"], direct["results"], strict=True):
        stripped = _strip_journal_meta(mine)
        assert stripped["journaled"], "every tools/call result through the proxy carries the journal's _meta"
        assert stripped["result"] == theirs
    return list(proxied["results"])


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_mcp_server_time_answers_the_same_through_the_proxy(journal: str, tmp_path: Path, mode: str) -> None:
    calls = [
        ("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ("convert_time", {"source_timezone": "Europe/Paris", "time": "23:30", "target_timezone": "America/New_York"}),
        ("convert_time", {"source_timezone": "Nowhere/City", "time": "12:00", "target_timezone": "UTC"}),  # isError
    ]
    argv = [str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    results = _compare(argv, mode, calls=calls, env=dict(os.environ), journal=journal)
    assert results[2]["isError"] is True


def _git_repo(path: Path) -> None:
    path.mkdir()
    env = {**os.environ, **FIXED_DATES}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    git("config", "user.name", "Test")
    git("config", "user.email", "test@example.com")
    (path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "first")
    (path / "a.txt").write_text("one\ntwo\n")
    (path / "b.txt").write_text("new file\n")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_mcp_server_git_answers_the_same_through_the_proxy_side_effects_included(
    journal: str, tmp_path: Path, mode: str
) -> None:
    if shutil.which("git") is None:  # pragma: no cover - git is a documented requirement
        pytest.fail("git is required")
    # Two identical repositories: one driven directly, one through the proxy. The same path is used for both
    # (the tools print it), so each run gets it in turn.
    repo = tmp_path / "repo"
    template = tmp_path / "template"
    _git_repo(template)
    calls = [
        ("git_status", {"repo_path": str(repo)}),
        ("git_diff_unstaged", {"repo_path": str(repo)}),
        ("git_log", {"repo_path": str(repo), "max_count": 5}),
        ("git_add", {"repo_path": str(repo), "files": ["a.txt", "b.txt"]}),
        ("git_commit", {"repo_path": str(repo), "message": "second"}),
        ("git_show", {"repo_path": str(repo), "revision": "HEAD"}),
        ("git_branch", {"repo_path": str(repo), "branch_type": "local"}),
        ("git_status", {"repo_path": str(repo / "not-a-repo")}),  # an error answer
    ]

    def fresh_repo() -> None:
        if repo.exists():
            shutil.rmtree(repo)
        shutil.copytree(template, repo)

    argv = [str(BIN / "mcp-server-git")]
    env = {**os.environ, **FIXED_DATES}
    results = _compare(argv, mode, calls=calls, env=env, journal=journal, prepare=fresh_repo)
    assert "second" in results[5]["content"][0]["text"]
