"""`checkpoint init --client gemini` on real files: how each Gemini entry is read and rewritten, the hooks already
there, the user's ``~/.gemini/settings.json``, and the entries refused by name (the real Gemini CLI judges the
result in test_gemini.py)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from .entries import run_init

CLOSED = "http://127.0.0.1:9"  # nothing listens: init never reaches these servers (--no-policy)


def write_settings(folder: Path, value: dict[str, Any]) -> Path:
    path = folder / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path


def gemini_init(project: Path, *args: str) -> tuple[int, str]:
    done = run_init("--client", "gemini", "--project", str(project), "--no-policy", *args)
    return done.returncode, done.stderr


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_httpurl_beats_url_beats_command_and_the_keys_it_replaces_go(tmp_path: Path) -> None:
    both = {
        "url": f"{CLOSED}/sse",
        "httpUrl": f"{CLOSED}/mcp",
        "headers": {"X-Tenant": "acme"},
        "trust": True,
        "includeTools": ["a"],
    }
    sse = {"type": "sse", "command": "unused", "args": ["x"], "url": f"{CLOSED}/sse", "timeout": 5000}
    path = write_settings(tmp_path, {"mcpServers": {"both": both, "sse": sse}})

    code, summary = gemini_init(tmp_path)

    assert code == 0, summary
    servers = json.loads(path.read_text())["mcpServers"]
    assert list(servers["both"]) == ["command", "args", "trust", "includeTools", "env"]
    assert option(servers["both"]["args"], "--upstream-url") == f"{CLOSED}/mcp"
    assert option(servers["both"]["args"], "--upstream-header-env") == "X-Tenant=CHECKPOINT_HEADER_X_TENANT"
    assert servers["both"]["env"] == {"CHECKPOINT_HEADER_X_TENANT": "acme"}
    assert list(servers["sse"]) == ["command", "args", "timeout"]
    assert option(servers["sse"]["args"], "--upstream-url") == f"{CLOSED}/sse"


def test_every_argument_gemini_would_expand_moves_into_env(tmp_path: Path) -> None:
    entry = {"command": sys.executable, "args": ["serve", "$API_TOKEN", "${REGION:-eu}", "cost: 5$"]}
    path = write_settings(tmp_path, {"mcpServers": {"tool": entry}})

    assert gemini_init(tmp_path)[0] == 0
    wrapped = json.loads(path.read_text())["mcpServers"]["tool"]
    command = option(wrapped["args"], "--upstream-cmd")
    assert wrapped["env"] == {"CHECKPOINT_ARG_2": "$API_TOKEN", "CHECKPOINT_ARG_3": "${REGION:-eu}"}
    assert shlex.split(command) == [sys.executable, "serve", "$CHECKPOINT_ARG_2", "$CHECKPOINT_ARG_3", "cost: 5$"]
    assert "API_TOKEN" not in json.dumps(wrapped["args"])


def test_an_entry_gemini_authenticates_itself_is_refused_by_name_and_nothing_is_written(tmp_path: Path) -> None:
    entry = {"httpUrl": f"{CLOSED}/mcp", "oauth": {"enabled": True}}
    path = write_settings(tmp_path, {"mcpServers": {"drive": entry}})
    before = path.read_bytes()

    code, message = gemini_init(tmp_path)

    assert code != 0
    assert "server 'drive'" in message, message
    assert "'oauth'" in message, message
    assert "--skip it" in message, message
    assert path.read_bytes() == before
    assert not (tmp_path / ".checkpoint").exists()


def test_an_entry_without_a_transport_is_refused_by_name(tmp_path: Path) -> None:
    write_settings(tmp_path, {"mcpServers": {"odd": {"args": ["x"]}}})
    code, message = gemini_init(tmp_path)
    assert code != 0
    assert "server 'odd': has none of 'httpUrl', 'url', 'command'" in message, message


def test_the_brief_hook_joins_the_hooks_already_there_once(tmp_path: Path) -> None:
    mine = {"matcher": "startup", "hooks": [{"name": "mine", "type": "command", "command": "echo hi"}]}
    tool = [{"matcher": "write_file", "hooks": [{"type": "command", "command": "lint"}]}]
    hooks = {"SessionStart": [mine], "BeforeTool": tool}
    path = write_settings(tmp_path, {"mcpServers": {"s": {"command": "srv"}}, "hooks": hooks})

    code, summary = gemini_init(tmp_path)

    assert code == 0, summary
    assert (
        "wrote the SessionStart hook `checkpoint brief --hook`: Gemini CLI sessions start with the brief" in summary
    ), summary
    assert "trust" in summary, summary
    written = json.loads(path.read_text())["hooks"]
    assert written["BeforeTool"] == tool
    assert written["SessionStart"][0] == mine
    brief = written["SessionStart"][1]
    assert "matcher" not in brief, "no matcher: every source (startup, resume, clear)"
    (hook,) = brief["hooks"]
    assert hook["name"] == "checkpoint-brief"
    assert hook["type"] == "command"
    assert hook["command"].endswith("brief --hook")
    assert hook["timeout"] == 10000, "Gemini's hook timeout is in milliseconds"

    code, again = gemini_init(tmp_path)
    assert "nothing to change" in again, again


def test_user_servers_get_their_own_journal_and_the_hook_and_undo_restores_the_user_file(
    tmp_path: Path, temp_home: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    user = write_settings(temp_home, {"mcpServers": {"notes": {"command": "notes-server", "cwd": "/srv"}}})
    original = user.read_bytes()

    code, summary = gemini_init(project, "--scope", "project")
    assert code == 0, summary
    assert "left alone: notes (user scope; not in --scope)" in summary, summary
    assert user.read_bytes() == original

    code, summary = gemini_init(project)
    assert code == 0, summary
    settings = json.loads(user.read_text())
    notes = settings["mcpServers"]["notes"]
    journal = temp_home / ".local" / "share" / "checkpoint" / "notes.db"
    assert option(notes["args"], "--journal") == str(journal)
    assert notes["cwd"] == "/srv"
    assert f"wrapped (user scope, {user}; each its own journal): notes" in summary, summary
    assert settings["hooks"]["SessionStart"][0]["hooks"][0]["name"] == "checkpoint-brief"
    assert "checkpoint-session" not in settings["mcpServers"], "the session server is the project's"

    assert run_init("--undo", "--project", str(project)).returncode == 0
    assert user.read_bytes() == original


def test_scope_local_is_refused_for_gemini(tmp_path: Path) -> None:
    code, message = gemini_init(tmp_path, "--scope", "local")
    assert code != 0
    assert "project and user" in message, message


def test_gemini_cli_home_moves_the_user_file_as_it_does_for_gemini(tmp_path: Path, temp_home: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "gemini-home"
    project.mkdir()
    in_home = write_settings(temp_home, {"mcpServers": {"a": {"command": "a-server"}}})
    moved = write_settings(elsewhere, {"mcpServers": {"b": {"command": "b-server"}}})
    before = in_home.read_bytes()

    done = run_init(
        "--client", "gemini", "--project", str(project), "--no-policy", env={"GEMINI_CLI_HOME": str(elsewhere)}
    )

    assert done.returncode == 0, done.stderr
    assert in_home.read_bytes() == before
    assert "--upstream-cmd" in json.loads(moved.read_text())["mcpServers"]["b"]["args"]
