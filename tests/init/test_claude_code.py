"""The real Claude Code CLI: `claude mcp list` shows every server of a real project connected before
`checkpoint init`, and every wrapped one (and the session server) connected after it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import nodetools
from .entries import run_init
from .realproject import HTTP_TOKEN, make_project
from httpservers import HttpServer, sdk_server

SERVERS = ["everything", "time", "git", "remote"]
LINE = re.compile(r"^(?P<name>[\w-]+): (?P<target>.*) - (?P<status>.+)$")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    with sdk_server(tmp_path) as server:
        yield server


def claude_env(home: Path) -> dict[str, str]:
    """A fresh HOME whose user settings approve project servers (a project's .mcp.json otherwise waits for the
    user's approval); no API key is needed to list servers."""
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    return {**env, "HOME": str(home), "HTTP_TOKEN": HTTP_TOKEN, "MCP_TIMEOUT": "60000", "DISABLE_AUTOUPDATER": "1"}


def mcp_list(project: Path, env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """name -> (what it runs, its status) as `claude mcp list` prints them."""
    done = subprocess.run(
        [str(nodetools.claude()), "mcp", "list"],
        check=False,
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = {}
    for line in done.stdout.splitlines():
        match = LINE.match(line.strip())
        if match:
            found[match["name"]] = (match["target"], match["status"])
    return found


@pytest.mark.timeout(300)  # two health checks of five servers each, on a machine that may be busy
def test_claude_code_connects_every_wrapped_server_as_it_did_before_init(
    tmp_path: Path, http_server: HttpServer
) -> None:
    project = make_project(tmp_path, http_server.url)
    env = claude_env(tmp_path / "home")
    before = mcp_list(project, env)
    assert {name: status for name, (_, status) in before.items()} == dict.fromkeys(SERVERS, "✔ Connected")

    done = run_init("--project", str(project), env=env)
    assert done.returncode == 0, done.stderr
    after = mcp_list(project, env)
    assert {name: status for name, (_, status) in after.items()} == dict.fromkeys(
        [*SERVERS, "checkpoint-session"], "✔ Connected"
    )
    for name in SERVERS:
        assert "checkpoint_mcp --journal" in after[name][0], after[name]
    assert "HTTP_TOKEN" not in after["remote"][0], "the header's reference moved into the entry's env"
