"""`checkpoint init` wraps the servers the real Claude Code CLI keeps in ``~/.claude.json`` (local and user scope):
`claude mcp list` connects them before and after, a call through one is journaled, a second `init` changes
nothing, `--undo` puts the file back byte for byte or, when Claude Code changed it since, only init's entries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from checkpoint_mcp.errors import InitError
from checkpoint_mcp.init import claude_json, files, plan, wrap

import nodetools
from .entries import run_init, stdio_params
from .test_claude_code import claude_env, mcp_list
from support import SERVERS, journal_calls

SECRET = "sk-live-do-not-leak"


def claude_mcp_add(project: Path, env: dict[str, str], scope: str, name: str) -> None:
    """`claude mcp add -s SCOPE NAME -e ... -- python effects_server.py` run by the real CLI in ``project``."""
    effects = f"EFFECTS_FILE={project / (name + '.jsonl')}"
    argv = [str(nodetools.claude()), "mcp", "add", "-s", scope, name, "-e", effects, "-e", f"API_KEY={SECRET}"]
    argv += ["--", sys.executable, str(SERVERS / "effects_server.py")]
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A project with one local-scope and one user-scope server, added by the real CLI under a temp HOME."""
    project = tmp_path / "my project"
    project.mkdir()
    env = {**claude_env(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "home" / "data")}
    claude_mcp_add(project, env, "local", "mine")
    claude_mcp_add(project, env, "user", "everywhere")
    return project, env


def dotclaude(env: dict[str, str]) -> Path:
    return Path(env["HOME"]) / ".claude.json"


def init_ok(*args: str, env: dict[str, str]) -> str:
    done = run_init(*args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


async def call_tool(target: Any) -> Any:
    async with Client(target, mode="legacy") as client:
        with anyio.fail_after(60):
            return await client.call_tool("send_email", {"to": "ann@example.com", "subject": "hi"})


@pytest.mark.timeout(240)  # two health checks by the real CLI, and one call through the proxy
def test_claude_code_connects_the_local_and_user_servers_init_wrapped_and_a_call_is_journaled(
    tmp_path: Path,
) -> None:
    project, env = setup(tmp_path)
    before = mcp_list(project, env)
    assert {name: status for name, (_, status) in before.items()} == dict.fromkeys(
        ["mine", "everywhere"], "✔ Connected"
    )
    document_before = json.loads(dotclaude(env).read_text())

    out = init_ok("--project", str(project), env=env)
    user_journal = Path(env["XDG_DATA_HOME"]) / "checkpoint" / "everywhere.db"
    assert f"(local scope, {dotclaude(env)}; the project's journal): mine" in out
    assert f"(user scope, {dotclaude(env)}; each its own journal): everywhere" in out

    after = mcp_list(project, env)
    assert {name: status for name, (_, status) in after.items()} == dict.fromkeys(
        ["mine", "everywhere", "checkpoint-session"], "✔ Connected"
    )
    assert "checkpoint_mcp --journal" in after["mine"][0]
    assert "checkpoint_mcp --journal" in after["everywhere"][0]

    document = json.loads(dotclaude(env).read_text())
    assert list(document) == list(document_before), "every key kept, in its place"
    local = document["projects"][str(project)]
    assert list(local) == list(document_before["projects"][str(project)])
    mine, everywhere = local["mcpServers"]["mine"], document["mcpServers"]["everywhere"]
    assert mine["args"][2:6] == ["--journal", f"{project}/.checkpoint/journal.db", "--workflow-id", "mine"]
    assert everywhere["args"][2:6] == ["--journal", str(user_journal), "--workflow-id", "everywhere"]
    assert mine["env"]["API_KEY"] == SECRET
    assert SECRET not in json.dumps(mine["args"])
    assert user_journal.parent.is_dir()
    # Each gets its own policy: the local one in the project, the user one beside its journal (it runs in every
    # project, and the project init ran in may go away).
    assert mine["args"][6:8] == ["--policy", f"{project}/.checkpoint/policies/mine.toml"]
    assert everywhere["args"][6:8] == ["--policy", str(user_journal.parent / "policies" / "everywhere.toml")]
    assert (user_journal.parent / "policies" / "everywhere.toml").is_file()
    user_settings = json.loads((Path(env["HOME"]) / ".claude" / "settings.json").read_text())
    assert user_settings["enableAllProjectMcpServers"] is True, "the user's settings kept"
    [group] = user_settings["hooks"]["SessionStart"]
    assert group["matcher"] == wrap.HOOK_MATCHER
    assert "brief --hook" in group["hooks"][0]["command"]

    result = anyio.run(call_tool, stdio_params(mine, env, project))
    assert result.content[0].text == "sent to ann@example.com"
    [row] = journal_calls(str(project / ".checkpoint" / "journal.db"), "mine")
    assert row.tool == "send_email"
    anyio.run(call_tool, stdio_params(everywhere, env, tmp_path))
    [row] = journal_calls(str(user_journal), "everywhere")
    assert row.tool == "send_email"


@pytest.mark.timeout(60)
def test_init_twice_changes_nothing_and_undo_puts_back_the_file_the_cli_wrote_byte_for_byte(tmp_path: Path) -> None:
    project, env = setup(tmp_path)
    original = dotclaude(env).read_bytes()
    assert claude_json.render(json.loads(original), original) == original, "Claude Code's own format"
    init_ok("--project", str(project), env=env)
    wrapped = dotclaude(env).read_bytes()
    assert wrapped != original
    assert not wrapped.endswith(b"\n")

    again = init_ok("--project", str(project), env=env)
    assert "nothing to change" in again
    assert dotclaude(env).read_bytes() == wrapped

    undone = init_ok("--project", str(project), "--undo", env=env)
    assert f"restored {dotclaude(env)}" in undone
    assert dotclaude(env).read_bytes() == original
    assert not (Path(env["HOME"]) / ".claude" / "settings.json").read_text().count("brief")


@pytest.mark.timeout(60)
def test_undo_keeps_what_claude_code_wrote_to_the_file_since_init(tmp_path: Path) -> None:
    project, env = setup(tmp_path)
    original = json.loads(dotclaude(env).read_text())
    init_ok("--project", str(project), env=env)
    claude_mcp_add(project, env, "local", "added-later")  # the real CLI rewrites the file after init
    edited = json.loads(dotclaude(env).read_text())
    edited["numStartups"] = 7
    dotclaude(env).write_text(json.dumps(edited, indent=2))

    undone = init_ok("--project", str(project), "--undo", env=env)
    assert f"put back the entries init changed in {dotclaude(env)}" in undone
    document = json.loads(dotclaude(env).read_text())
    assert document["numStartups"] == 7
    servers = document["projects"][str(project)]["mcpServers"]
    assert list(servers) == ["mine", "added-later"]
    assert servers["mine"] == original["projects"][str(project)]["mcpServers"]["mine"]
    assert document["mcpServers"] == original["mcpServers"]


def test_a_change_between_read_and_write_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    project, env = setup(tmp_path)
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    request = plan.Request(project=str(project), environ=env, launcher=wrap.Launcher(sys.executable))
    decided = plan.plan(request)
    assert {change.path for change in decided.changes} >= {str(dotclaude(env)), str(project / ".mcp.json")}
    meanwhile = dotclaude(env).read_bytes().replace(b'"projects"', b'"tipsHistory": {},\n  "projects"', 1)
    dotclaude(env).write_bytes(meanwhile)  # Claude Code writes its file between init's read and its write

    with pytest.raises(InitError, match=r"changed while init was running .* run `checkpoint init` again"):
        files.apply(str(project), decided.changes)
    assert dotclaude(env).read_bytes() == meanwhile
    assert (project / ".mcp.json").read_text() == '{"mcpServers": {}}'
    assert files.recorded_runs(str(project)) == [], "no run recorded: there is nothing to undo"


def test_scope_chooses_the_files_and_names_the_servers_left_out(tmp_path: Path) -> None:
    project, env = setup(tmp_path)
    original = dotclaude(env).read_bytes()
    out = init_ok("--project", str(project), "--scope", "project", env=env)
    assert "left alone: mine (local scope; not in --scope)" in out
    assert "left alone: everywhere (user scope; not in --scope)" in out
    assert dotclaude(env).read_bytes() == original
    assert not (Path(env["HOME"]) / ".claude" / "settings.json").read_text().count("brief")

    out = init_ok("--project", str(project), "--scope", "local,project", env=env)
    assert "(local scope" in out
    assert "left alone: everywhere (user scope; not in --scope)" in out
    document = json.loads(dotclaude(env).read_text())
    assert wrap.runs_checkpoint(document["projects"][str(project)]["mcpServers"]["mine"])
    assert not wrap.runs_checkpoint(document["mcpServers"]["everywhere"])

    bad = run_init("--project", str(project), "--scope", "global", env=env)
    assert bad.returncode != 0
    assert "unknown --scope 'global' (the scopes: local, project, user)" in bad.stderr
    cursor = run_init("--project", str(project), "--client", "cursor", "--scope", "user", env=env)
    assert cursor.returncode != 0
    assert "--scope is for --client claude-code" in cursor.stderr
    only = init_ok("--project", str(project), "--only", "everywhere", "--dry-run", env=env)
    assert "would wrap (user scope" in only


def test_claude_config_dir_moves_the_file_as_it_does_for_the_cli(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = tmp_path / "config"
    env = {**claude_env(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(config)}
    claude_mcp_add(project, env, "local", "mine")
    claude_mcp_add(project, env, "user", "everywhere")
    assert not dotclaude(env).exists(), "the CLI wrote its file in CLAUDE_CONFIG_DIR"

    init_ok("--project", str(project), env=env)
    document = json.loads((config / ".claude.json").read_text())
    assert wrap.runs_checkpoint(document["projects"][str(project)]["mcpServers"]["mine"])
    assert wrap.runs_checkpoint(document["mcpServers"]["everywhere"])
    assert "brief --hook" in (config / "settings.json").read_text()
    assert not dotclaude(env).exists()


def test_a_claude_json_init_cannot_read_stops_it_only_when_its_scopes_are_asked_for(tmp_path: Path) -> None:
    project, env = setup(tmp_path)
    dotclaude(env).write_text('{"projects": ')
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    refused = run_init("--project", str(project), env=env)
    assert refused.returncode != 0
    assert f"{dotclaude(env)}: is not valid JSON" in refused.stderr
    assert (project / ".mcp.json").read_text() == '{"mcpServers": {}}'
    init_ok("--project", str(project), "--scope", "project", env=env)
    assert "checkpoint-session" in (project / ".mcp.json").read_text()
