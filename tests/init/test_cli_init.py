"""`checkpoint init` as a real process on real files: round trips, hostile configs, every client's file shape."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.init.clients import desktop_config_path

from .entries import run_init, servers

HOSTILE_MCP_JSON = """{
\t"mcpServers": {
\t\t"quoted": {"command": "python3", "args": ["-c", "print('it''s \\"x\\"')", "a  b", "$HOME", "${TOKEN}", "\u00e9t\u00e9 \u2603"],
\t\t\t"env": {"API_KEY": "sk-live-1234", "FROM_ENV": "${TOKEN}"}, "x-vendor": {"keep": [1, 2.50, null]}},
\t\t"remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
\t\t"mine": {"command": "/usr/local/bin/checkpoint", "args": ["--journal", "j.db", "--upstream-cmd", "srv"]}
\t},
\t"x-top": "kept"
}"""

SETTINGS_JSON = '{"permissions": {"allow": ["Bash(ls)"]}, "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo hello"}]}], "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}'


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def folders(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my project"
    (root / ".claude").mkdir(parents=True)
    (root / ".mcp.json").write_text(HOSTILE_MCP_JSON)
    (root / ".claude" / "settings.json").write_text(SETTINGS_JSON)
    return root


def init_ok(*args: str, **kw: Any) -> str:
    done = run_init(*args, **kw)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_init_then_init_again_changes_nothing_and_undo_puts_back_the_original_bytes(project: Path) -> None:
    before, dirs = snapshot(project), folders(project)
    out = init_ok("--project", str(project), "--diff")
    assert f"--- {project}/.mcp.json" in out
    assert f"+++ {project}/.claude/settings.json" in out
    assert "; the project's journal): quoted, remote" in out
    assert "left alone: mine (already runs checkpoint)" in out

    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["x-top"] == "kept"
    assert list(mcp["mcpServers"]) == ["quoted", "remote", "mine", "checkpoint-session"]
    quoted = mcp["mcpServers"]["quoted"]
    assert quoted["command"] == sys.executable
    assert quoted["args"][:2] == ["-m", "checkpoint_mcp"]
    assert quoted["args"][2:6] == ["--journal", f"{project}/.checkpoint/journal.db", "--workflow-id", "quoted"]
    assert quoted["env"] == {"API_KEY": "sk-live-1234", "FROM_ENV": "${TOKEN}", "CHECKPOINT_ARG_5": "${TOKEN}"}
    assert quoted["x-vendor"] == {"keep": [1, 2.5, None]}
    assert "sk-live" not in json.dumps(quoted["args"])
    assert mcp["mcpServers"]["mine"] == json.loads(HOSTILE_MCP_JSON)["mcpServers"]["mine"]
    assert mcp["mcpServers"]["checkpoint-session"] == {
        "command": sys.executable,
        "args": ["-m", "checkpoint_mcp", "session"],
    }
    assert (project / ".mcp.json").read_text().startswith('{\n\t"mcpServers"'), "the file's own indentation is kept"

    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == {"allow": ["Bash(ls)"]}
    assert len(settings["hooks"]["Stop"]) == 1
    first, added = settings["hooks"]["SessionStart"]
    assert first == {"hooks": [{"type": "command", "command": "echo hello"}]}
    assert added["hooks"][0]["command"] == f"{sys.executable} -m checkpoint_mcp brief --hook"
    policies = project / ".checkpoint" / "policies"
    assert sorted(p.name for p in policies.iterdir()) == ["quoted.toml", "remote.toml"]
    assert quoted["args"][6:8] == ["--policy", str(policies / "quoted.toml")]
    assert mcp["mcpServers"]["remote"]["args"][6:8] == ["--policy", str(policies / "remote.toml")]
    assert "warning: quoted could not be asked for its tools" in out

    after = snapshot(project)
    again = init_ok("--project", str(project))
    assert "nothing to change" in again
    assert "---" not in again
    assert snapshot(project) == after, "the second run writes nothing, not even a new record"

    undone = init_ok("--undo", "--project", str(project))
    assert f"restored {project}/.mcp.json" in undone
    assert f"removed {project}/.checkpoint/policies/quoted.toml" in undone
    assert snapshot(project) == before
    assert folders(project) == dirs
    assert run_init("--undo", "--project", str(project)).returncode == 1
    assert run_init("--undo", "--dry-run", "--project", str(project)).returncode == 2


def test_dry_run_prints_the_diffs_and_writes_nothing(project: Path) -> None:
    before, dirs = snapshot(project), folders(project)
    out = init_ok("--dry-run", "--project", str(project))
    assert '+\t\t\t\t"--upstream-cmd",' in out
    assert "dry run: nothing was written" in out
    assert snapshot(project) == before
    assert folders(project) == dirs


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (".mcp.json", '{"mcpServers": {"a": {"command": "x",}}}', "/.mcp.json: is not valid JSON (line 1, column 38"),
        (".mcp.json", '["not", "an", "object"]', "/.mcp.json: the file is not a JSON object"),
        (".mcp.json", '{"mcpServers": []}', "'mcpServers' is not an object of servers"),
        (
            ".mcp.json",
            '{"mcpServers": {"ok": {"command": "a"}, "bad": {"command": "a", "url": "http://x"}}}',
            "/.mcp.json: server 'bad': has both 'command' and 'url'",
        ),
        (
            ".mcp.json",
            '{"mcpServers": {"ok": {"command": "a"}, "ws": {"type": "ws", "url": "ws://x"}}}',
            "server 'ws': unknown server type 'ws'",
        ),
        (
            ".mcp.json",
            '{"mcpServers": {"a": {"command": "a", "args": "one string"}}}',
            "server 'a': 'args' is not a list of strings",
        ),
        (
            ".mcp.json",
            '{"mcpServers": {"a": {"command": "a", "env": {"N": 1}}}}',
            "server 'a': 'env' is not an object of strings",
        ),
        (".mcp.json", '{"mcpServers": {"a": {"args": []}}}', "server 'a': has neither 'command' nor 'url'"),
        (
            ".mcp.json",
            '{"mcpServers": {"h": {"url": "http://x", "headersHelper": "/bin/gen"}}}',
            "server 'h': 'headersHelper'",
        ),
        (".mcp.json", b'{"mcpServers": {"\xff": {}}}', "/.mcp.json: is not UTF-8 text"),
        (
            ".claude/settings.json",
            '{"hooks": {"SessionStart": {"not": "a list"}}}',
            "/.claude/settings.json: 'hooks.SessionStart' is not a list",
        ),
        (".claude/settings.json", "{oops", "/.claude/settings.json: is not valid JSON"),
    ],
)
def test_a_config_it_cannot_read_is_an_error_naming_the_file_and_entry_and_nothing_is_written(
    project: Path, name: str, content: str | bytes, message: str
) -> None:
    target = project / name
    target.write_bytes(content if isinstance(content, bytes) else content.encode())
    before, dirs = snapshot(project), folders(project)
    done = run_init("--project", str(project))
    assert done.returncode == 1
    assert message in done.stderr
    assert "nothing was written" in done.stderr
    assert done.stdout == ""
    assert snapshot(project) == before
    assert folders(project) == dirs


def test_only_and_skip_choose_the_servers_and_an_unknown_name_is_an_error(project: Path) -> None:
    done = run_init("--project", str(project), "--only", "nope")
    assert done.returncode == 1
    assert "has no server named 'nope' (it has: quoted, remote, mine)" in done.stderr
    out = init_ok("--project", str(project), "--skip", "quoted,mine")
    assert "; the project's journal): remote\n" in out
    assert "left alone: quoted (skipped)" in out
    mcp = servers(project / ".mcp.json")
    assert mcp["quoted"] == json.loads(HOSTILE_MCP_JSON)["mcpServers"]["quoted"]
    out = init_ok("--project", str(project), "--only", "quoted")
    assert "; the project's journal): quoted\n" in out
    init_ok("--undo", "--project", str(project))
    assert (project / ".mcp.json").read_text() == HOSTILE_MCP_JSON, "one undo undoes both runs"
    assert run_init("--undo", "--project", str(project)).returncode == 1


def test_a_policy_given_goes_to_every_wrapped_server_and_none_is_written(project: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[default]\nrepeat = "refuse"\nwindow = "24h"\n')
    init_ok("--project", str(project), "--policy", str(policy), "--journal", str(tmp_path / "j.db"))
    mcp = servers(project / ".mcp.json")
    for name in ("quoted", "remote"):
        args = mcp[name]["args"]
        assert args[args.index("--policy") + 1] == str(policy)
        assert args[args.index("--journal") + 1] == str(tmp_path / "j.db")
    assert "--policy" not in mcp["checkpoint-session"]["args"]
    assert not (project / ".checkpoint" / "policies").exists()


def test_another_clients_servers_get_their_policies_too(tmp_path: Path) -> None:
    effects = Path(__file__).parents[1] / "servers" / "effects_server.py"
    path = tmp_path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"mail box": {"command": sys.executable, "args": [str(effects)]}}}))
    out = init_ok("--project", str(tmp_path), "--client", "cursor")
    policy = tmp_path / ".checkpoint" / "policies" / "mail_box.toml"
    args = servers(path)["mail box"]["args"]
    assert args[args.index("--policy") + 1] == str(policy)
    assert (
        "# readOnlyHint: it only reads, so it is not journaled. Arguments: none.\n[tools.lookup]\n"
        in policy.read_text()
    )
    [review] = [line for line in out.splitlines() if line.startswith("review first: mail box's tools send_quiet, ")]
    assert "send_email" not in review, "it has hints (destructiveHint), so it is not one to review first"
    assert "lookup" not in review


def test_no_policy_writes_none_and_gives_no_server_one(project: Path) -> None:
    out = init_ok("--project", str(project), "--no-policy")
    assert "; the project's journal): quoted, remote" in out
    assert "policies" not in out
    assert not any("--policy" in entry.get("args", []) for entry in servers(project / ".mcp.json").values())
    assert not (project / ".checkpoint" / "policies").exists()
    both = run_init("--project", str(project), "--no-policy", "--policy", str(project / ".mcp.json"))
    assert both.returncode == 2
    assert "give --policy FILE or --no-policy, not both" in both.stderr


def test_undo_keeps_a_version_edited_since_beside_the_restored_original(project: Path) -> None:
    init_ok("--project", str(project))
    edited = (project / ".mcp.json").read_text().replace('"x-top": "kept"', '"x-top": "edited by hand"')
    (project / ".mcp.json").write_text(edited)
    out = init_ok("--undo", "--project", str(project))
    [aside] = [p for p in project.iterdir() if p.name.startswith(".mcp.json.checkpoint-undo-")]
    assert str(aside) in out
    assert aside.read_text() == edited
    assert (project / ".mcp.json").read_text() == HOSTILE_MCP_JSON


def test_a_project_without_any_config_gets_the_session_server_and_the_hook_and_undo_removes_them(
    tmp_path: Path,
) -> None:
    init_ok("--project", str(tmp_path))
    assert servers(tmp_path / ".mcp.json") == {
        "checkpoint-session": {"command": sys.executable, "args": ["-m", "checkpoint_mcp", "session"]}
    }
    assert (tmp_path / ".claude" / "settings.json").exists()
    init_ok("--undo", "--project", str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_the_running_console_script_is_written_by_its_absolute_path(project: Path) -> None:
    script = Path(sys.executable).parent / "checkpoint"
    assert script.exists(), "the test environment installs the console script"
    done = subprocess.run(
        ["checkpoint", "init"],
        cwd=project,
        env={**os.environ, "PATH": f"{script.parent}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    mcp = servers(project / ".mcp.json")
    assert mcp["quoted"]["command"] == str(script)
    assert mcp["quoted"]["args"][0] == "--journal"
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["SessionStart"][1]["hooks"][0]["command"] == shlex.join([str(script), "brief", "--hook"])


VSCODE_JSON = {
    "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": True}],
    "servers": {
        "files": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@x/files", "${workspaceFolder}"],
            "env": {"KEY": "${input:api-key}"},
        },
        "web": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"X-Key": "${input:api-key}"}},
    },
}


@pytest.mark.parametrize(
    ("client", "relative", "key", "document"),
    [
        (
            "cursor",
            ".cursor/mcp.json",
            "mcpServers",
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "@x/files", "${env:HOME}"]},
                    "web": {"url": "https://api.example.com/mcp", "headers": {"X-Key": "${env:KEY}"}},
                }
            },
        ),
        ("vscode", ".vscode/mcp.json", "servers", VSCODE_JSON),
    ],
)
def test_cursor_and_vscode_files_are_wrapped_in_their_own_shape(
    tmp_path: Path, client: str, relative: str, key: str, document: dict[str, Any]
) -> None:
    path = tmp_path / relative
    path.parent.mkdir()
    original = json.dumps(document, indent=4)
    path.write_text(original)
    # Cursor's npx server would be started to list its tools (and npx would fetch a package that does not exist).
    out = init_ok("--project", str(tmp_path), "--client", client, *(["--no-policy"] if client == "cursor" else []))
    if client == "vscode":  # ${input:…} is known only to VS Code: neither server can be asked now
        assert "warning: files could not be asked for its tools (${input:api-key} is known only to the client)" in out
        assert "warning: web could not be asked for its tools (${input:api-key} is known only to the client)" in out
    written = json.loads(path.read_text())
    assert set(written) == set(document), "no other top-level key appears (VS Code's inputs are kept)"
    table = written[key]
    files = table["files"]
    assert files["args"][-2] == "--upstream-cmd"
    assert files["args"][-1] == 'npx -y @x/files "$CHECKPOINT_ARG_3"'
    assert files["env"]["CHECKPOINT_ARG_3"] == document[key]["files"]["args"][2]
    web = table["web"]
    assert "url" not in web
    assert "headers" not in web
    assert "--upstream-url" in web["args"]
    assert web["env"]["CHECKPOINT_HEADER_X_KEY"] == document[key]["web"]["headers"]["X-Key"]
    session = table["checkpoint-session"]
    journal = str(tmp_path / ".checkpoint" / "journal.db")
    assert session["args"] == [
        "-m",
        "checkpoint_mcp",
        "session",
        "--journal",
        journal,
        "--workflow-id",
        "files",
        "--journal",
        journal,
        "--workflow-id",
        "web",
    ]
    assert session["env"] == {"CHECKPOINT_PROJECT_ROOT": str(tmp_path)}
    assert not (tmp_path / ".claude").exists()
    assert not (tmp_path / ".mcp.json").exists()
    init_ok("--undo", "--project", str(tmp_path))
    assert path.read_text() == original


def test_claude_desktop_writes_its_per_user_file(tmp_path: Path) -> None:
    config = tmp_path / "config"
    desktop = config / "Claude" / "claude_desktop_config.json"
    desktop.parent.mkdir(parents=True)
    original = (
        '{"globalShortcut": "Ctrl+Space", "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}'
    )
    desktop.write_text(original)
    project = tmp_path / "proj"
    project.mkdir()
    init_ok("--project", str(project), "--client", "claude-desktop", env={"XDG_CONFIG_HOME": str(config)})
    written = json.loads(desktop.read_text())
    assert written["globalShortcut"] == "Ctrl+Space"
    assert written["mcpServers"]["time"]["args"][-1] == "uvx mcp-server-time"
    assert written["mcpServers"]["checkpoint-session"]["env"] == {"CHECKPOINT_PROJECT_ROOT": str(project)}
    assert (project / ".checkpoint" / "init").is_dir(), "the originals are kept under the project"
    init_ok("--undo", "--project", str(project))
    assert desktop.read_text() == original


def test_claude_desktop_file_is_where_each_os_keeps_it() -> None:
    assert desktop_config_path({"HOME": "/Users/ann"}, "darwin") == (
        "/Users/ann/Library/Application Support/Claude/claude_desktop_config.json"
    )
    assert desktop_config_path({"HOME": "/h", "APPDATA": "/h/AppData/Roaming"}, "win32").endswith(
        os.path.join("Roaming", "Claude", "claude_desktop_config.json")
    )
    assert desktop_config_path({"HOME": "/home/ann"}, "linux") == "/home/ann/.config/Claude/claude_desktop_config.json"


@pytest.mark.parametrize(
    ("client", "relative", "key"),
    [
        ("cursor", "project/.cursor/mcp.json", "mcpServers"),
        ("vscode", "project/.vscode/mcp.json", "servers"),
        ("claude-desktop", "config/Claude/claude_desktop_config.json", "mcpServers"),
    ],
)
def test_a_second_init_gives_the_session_server_the_journals_of_servers_added_since_and_undo_goes_back_to_the_start(
    tmp_path: Path, client: str, relative: str, key: str
) -> None:
    project, path = tmp_path / "project", tmp_path / relative
    path.parent.mkdir(parents=True)
    project.mkdir(exist_ok=True)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    original = json.dumps({key: {"files": {"command": "npx", "args": ["-y", "@x/files"]}}}, indent=4)
    path.write_text(original)
    args = ("--project", str(project), "--client", client)
    journal = str(project / ".checkpoint" / "journal.db")
    init_ok(*args, env=env)
    prefix = ["-m", "checkpoint_mcp", "session"]
    assert servers(path, key)["checkpoint-session"]["args"] == [*prefix, "--journal", journal, "--workflow-id", "files"]

    document = json.loads(path.read_text())
    document[key]["web"] = {"url": "https://api.example.com/mcp"}
    added = json.dumps(document, indent=4)
    path.write_text(added)
    out = init_ok(*args, env=env)
    assert "; the project's journal): web" in out
    assert "gave the session server 'checkpoint-session' 1 more journal(s)" in out
    table = servers(path, key)
    assert "--upstream-url" in table["web"]["args"]
    assert table["checkpoint-session"]["args"] == [
        *prefix,
        *("--journal", journal, "--workflow-id", "files"),
        *("--journal", journal, "--workflow-id", "web"),
    ]
    assert table["checkpoint-session"]["env"] == {"CHECKPOINT_PROJECT_ROOT": str(project)}

    twice = path.read_bytes()
    assert "nothing to change" in init_ok(*args, env=env)
    assert path.read_bytes() == twice

    out = init_ok("--undo", "--project", str(project))
    assert path.read_text() == original, "the state before the first init"
    [aside] = [p for p in path.parent.iterdir() if ".checkpoint-undo-" in p.name]
    assert aside.read_text() == added, "the server added by hand between the two runs is kept beside"
    assert out.count(f"restored {path}") == 1
    assert not (project / ".checkpoint").exists()
    assert run_init("--undo", "--project", str(project)).returncode == 1, "nothing left to undo"


def test_init_prints_a_summary_and_the_diffs_only_with_diff(project: Path) -> None:
    quiet = run_init("--project", str(project))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "", "no diff without --diff"
    assert "; the project's journal): quoted, remote" in quiet.stderr
    init_ok("--undo", "--project", str(project))

    loud = run_init("--project", str(project), "--diff")
    assert loud.returncode == 0, loud.stderr
    assert f"+++ {project}/.mcp.json" in loud.stdout
    assert f"+++ {project}/.checkpoint/policies/remote.toml" in loud.stdout, "the policy files too"
    assert loud.stderr == quiet.stderr, "the same summary"
    assert run_init("--undo", "--diff", "--project", str(project)).returncode == 2


def test_vscode_gets_a_session_start_agent_hook_of_its_own_that_a_second_init_leaves_and_undo_removes(
    tmp_path: Path,
) -> None:
    """VS Code (Preview) runs the ``SessionStart`` hooks of ``.github/hooks/*.json`` at the first prompt of each chat
    and reads Claude Code's ``hookSpecificOutput``: the hook names the project and every journal."""
    vscode = tmp_path / ".vscode" / "mcp.json"
    vscode.parent.mkdir()
    vscode.write_text(json.dumps({"servers": {"files": {"command": "npx", "args": ["-y", "@x/files"]}}}))
    out = init_ok("--project", str(tmp_path), "--client", "vscode", "--no-policy")
    assert (
        "wrote the SessionStart agent hook .github/hooks/checkpoint-session-start.json: VS Code sessions start" in out
    )
    assert "sessions: VS Code runs the SessionStart agent hook (Preview" in out
    hook_file = tmp_path / ".github" / "hooks" / "checkpoint-session-start.json"
    (hook,) = json.loads(hook_file.read_text())["hooks"]["SessionStart"]
    journal = str(tmp_path / ".checkpoint" / "journal.db")
    assert hook["type"] == "command"
    assert hook["command"].endswith(
        f"brief --hook --project-root {tmp_path} --journal {journal} --workflow-id files"
    ), hook
    assert "nothing to change" in init_ok("--project", str(tmp_path), "--client", "vscode", "--no-policy")
    init_ok("--undo", "--project", str(tmp_path))
    assert not hook_file.exists()
