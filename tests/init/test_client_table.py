"""The table of clients (``clients.CLIENTS``) as `checkpoint init` uses it: every entry is a client `init` takes,
whose format and brief kind exist; Cursor's ``sessionStart`` hook, run as Cursor runs it, prints the brief in
Cursor's JSON; and `init` without ``--client`` names every client it finds configured. Real `checkpoint init`
processes on real files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from checkpoint_mcp.init import briefs, clients, formats
from checkpoint_mcp.init.command import init as init_command

from .entries import python_entry, run_init

EFFECTS = Path(__file__).resolve().parents[1] / "servers" / "effects_server.py"


def test_every_client_of_the_table_is_one_init_takes_and_names_a_format_and_a_brief_that_exist() -> None:
    choices = next(p for p in init_command.params if p.name == "client").type.choices  # type: ignore[attr-defined]
    assert list(choices) == list(clients.CLIENTS)
    for client in clients.CLIENTS.values():
        assert client.label, client.name
        assert client.entry_format in formats.FORMATS, client.name
        assert client.brief is None or client.brief in briefs.KINDS, client.name
        assert client.hook_output in ("claude", "copilot", "cursor", "text"), client.name
        assert client.planner in ("json", "codex", "files"), client.name
        assert client.scopes() or client.name == clients.CLAUDE_DESKTOP, client.name


def cursor_project(tmp_path: Path, hooks: object | None = None) -> Path:
    project = tmp_path / "project"
    (project / ".cursor").mkdir(parents=True)
    entry = python_entry(str(EFFECTS), env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")})
    (project / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"effects": entry}}, indent=2))
    if hooks is not None:
        (project / ".cursor" / "hooks.json").write_text(json.dumps(hooks, indent=2))
    return project


def test_cursor_gets_a_session_start_hook_that_prints_the_brief_in_cursor_s_json(tmp_path: Path) -> None:
    theirs = {"command": "./audit.sh"}
    project = cursor_project(tmp_path, {"version": 1, "hooks": {"sessionStart": [theirs], "stop": [theirs]}})
    before = (project / ".cursor" / "hooks.json").read_bytes()
    done = run_init("--project", str(project), "--client", "cursor", "--no-policy")
    assert done.returncode == 0, done.stderr
    assert "wrote the sessionStart hook in .cursor/hooks.json: Cursor sessions start with the brief" in done.stderr, (
        done.stderr
    )

    hooks = json.loads((project / ".cursor" / "hooks.json").read_text())
    first, ours = hooks["hooks"]["sessionStart"]
    assert first == theirs
    assert hooks["hooks"]["stop"] == [theirs], "every other hook is kept"
    assert "--hook-format cursor" in ours["command"]
    journal = str(project / ".checkpoint" / "journal.db")
    assert f"--journal {journal} --workflow-id effects" in ours["command"]

    # Cursor runs the hook's command with a shell, the session's JSON on stdin, and reads its stdout.
    payload = json.dumps({"hook_event_name": "sessionStart", "workspace_roots": [str(project)]})
    ran = subprocess.run(
        ["/bin/sh", "-c", ours["command"]], input=payload, capture_output=True, text=True, timeout=60, check=True
    )
    printed = json.loads(ran.stdout)
    assert list(printed) == ["additional_context"]
    assert "checkpoint" in printed["additional_context"].lower()

    again = run_init("--project", str(project), "--client", "cursor", "--no-policy")
    assert "nothing to change" in again.stderr, again.stderr
    assert run_init("--undo", "--project", str(project)).returncode == 0
    assert (project / ".cursor" / "hooks.json").read_bytes() == before


def test_cursor_s_hook_names_the_journal_of_a_server_wrapped_later(tmp_path: Path) -> None:
    project = cursor_project(tmp_path)
    assert run_init("--project", str(project), "--client", "cursor", "--no-policy").returncode == 0
    path = project / ".cursor" / "mcp.json"
    document = json.loads(path.read_text())
    document["mcpServers"]["later"] = python_entry(str(EFFECTS))
    path.write_text(json.dumps(document, indent=2))
    assert run_init("--project", str(project), "--client", "cursor", "--no-policy").returncode == 0
    [ours] = json.loads((project / ".cursor" / "hooks.json").read_text())["hooks"]["sessionStart"]
    assert ours["command"].endswith(
        "--workflow-id effects --journal " + str(project / ".checkpoint" / "journal.db") + " --workflow-id later"
    )


def test_init_without_a_client_names_every_client_it_finds_configured_and_the_one_it_wrapped(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"effects": python_entry(str(EFFECTS))}}))
    (project / "opencode.json").write_text(json.dumps({"mcp": {}}))
    home = Path(os.environ["HOME"])  # the temporary one (conftest)
    (home / ".qwen").mkdir(exist_ok=True)
    (home / ".qwen" / "settings.json").write_text("{}")
    done = run_init("--project", str(project), "--no-policy")
    assert done.returncode == 0, done.stderr
    assert "; the project's journal): effects" in done.stderr
    [found] = [line for line in done.stderr.splitlines() if line.startswith("clients found configured here: ")]
    assert f"Claude Code ({project / '.mcp.json'})" in found
    assert f"OpenCode ({project / 'opencode.json'})" in found
    assert f"Qwen Code ({home / '.qwen' / 'settings.json'})" in found
    assert "Cline" not in found
    assert "this run wrapped Claude Code's servers (the default without --client)" in done.stderr
    assert "to wrap OpenCode's servers too: checkpoint init --client opencode" in done.stderr
    assert "to wrap Qwen Code's servers too: checkpoint init --client qwen" in done.stderr
    named = run_init("--project", str(project), "--client", "claude-code", "--no-policy")
    assert "clients found configured here" not in named.stderr, "only a run without --client says it"


def test_a_client_without_a_local_scope_refuses_it_by_its_name(tmp_path: Path) -> None:
    done = run_init("--project", str(tmp_path), "--client", "opencode", "--scope", "local")
    assert done.returncode == 2
    assert "OpenCode has no local scope" in done.stderr
    cline = run_init("--project", str(tmp_path), "--client", "cline", "--scope", "project")
    assert cline.returncode == 2
    assert "--scope is for --client" in cline.stderr


def test_copilot_leaves_claude_code_s_session_server_in_the_shared_mcp_json_as_it_is(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"effects": python_entry(str(EFFECTS))}}))
    assert run_init("--project", str(project), "--no-policy").returncode == 0
    claude_code = (project / ".mcp.json").read_bytes()

    done = run_init("--project", str(project), "--client", "copilot", "--no-policy")
    assert done.returncode == 0, done.stderr
    assert (project / ".mcp.json").read_bytes() == claude_code, "Claude Code's bare session server keeps its args"
    assert "left alone: effects (already runs checkpoint)" in done.stderr
    assert "left alone: checkpoint-session (already runs checkpoint)" in done.stderr
    hook = json.loads((project / ".github" / "hooks" / "checkpoint-brief.json").read_text())
    [start] = hook["hooks"]["sessionStart"]
    assert f"--journal {project / '.checkpoint' / 'journal.db'} --workflow-id effects" in start["bash"]
    assert not (project / ".github" / "mcp.json").exists(), "Copilot reads the session server from .mcp.json"
