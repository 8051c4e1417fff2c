"""The real Claude Code CLI: `claude mcp list` shows every server of a real project connected before
`checkpoint init`, and every wrapped one (and the session server) connected after it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import nodetools
from .entries import run_init
from .realproject import HTTP_TOKEN, make_project
from httpservers import HttpServer, faults_server, sdk_server

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
    return parsed(mcp_list_output(project, env))


def parsed(output: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in output.splitlines():
        match = LINE.match(line.strip())
        if match:
            found[match["name"]] = (match["target"], match["status"])
    return found


def mcp_list_output(project: Path, env: dict[str, str]) -> str:
    """What `claude mcp list` prints (its stdout and stderr)."""
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
    return done.stdout + done.stderr


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


PAY_TOKEN = "pay-'token' with $dollars"


@pytest.mark.timeout(180)
def test_a_wrapped_http_server_with_a_secret_header_connects_without_a_missing_variables_warning(
    tmp_path: Path,
) -> None:
    with faults_server(tmp_path, "--require-authorization", f"Bearer {PAY_TOKEN}") as server:
        project = tmp_path / "project"
        project.mkdir()
        pay = {"type": "http", "url": server.url, "headers": {"Authorization": "Bearer ${PAY_TOKEN}"}}
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"pay": pay}}))
        done = run_init("--project", str(project))
        assert done.returncode == 0, done.stderr
        # Beside it, the same server as an older init wrote it (the header a ${…} in args): the control that
        # shows Claude Code does warn about that form, and that both reach a server refusing a wrong header.
        config = json.loads((project / ".mcp.json").read_text())
        old_args = ["-m", "checkpoint_mcp", "--upstream-url", server.url]
        old_args += ["--upstream-header", "Authorization: ${CHECKPOINT_HEADER_AUTHORIZATION}"]
        config["mcpServers"]["older"] = {
            "command": sys.executable,
            "args": old_args,
            "env": {"CHECKPOINT_HEADER_AUTHORIZATION": "Bearer ${PAY_TOKEN}"},
        }
        (project / ".mcp.json").write_text(json.dumps(config))
        env = {**claude_env(tmp_path / "home"), "PAY_TOKEN": PAY_TOKEN}
        output = mcp_list_output(project, env)
    listed = parsed(output)
    assert listed["pay"][1] == "✔ Connected", output
    assert "--upstream-header-env Authorization=CHECKPOINT_HEADER_AUTHORIZATION" in listed["pay"][0]
    assert listed["older"][1] == "✔ Connected", output
    warnings = [line for line in output.splitlines() if "Missing environment variables" in line]
    assert warnings, "the control: Claude Code warns about the ${…} an older init left in args"
    assert all("[older]" in line for line in warnings), warnings
    received = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert not [r for r in received if r["event"] == "unauthorized"], "every request carried the header"
    assert {r["auth"] for r in received if r["event"] == "received"} == {f"Bearer {PAY_TOKEN}"}
