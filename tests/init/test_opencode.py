"""`checkpoint init --client opencode`, judged by the real OpenCode CLI (npm ``opencode-ai``, pinned in tools/npm)
in a temporary HOME, offline but for a scripted Chat Completions model on loopback (``scripted_chat``).

The project's ``opencode.json`` names a local mail server (a secret in its ``environment``) and a remote billing
server whose bearer token comes from ``{env:BILLING_TOKEN}``; the user's ``~/.config/opencode/opencode.json`` has a
local server of its own. ``opencode mcp list`` shows every one connected before `init` and after it, the session
server too; a second `init` changes nothing; ``--undo`` puts every file back byte for byte. Headless sessions
(``opencode run``): the first sends the e-mail and bills once, both journaled; the next is shown the brief by the
plugin `init` wrote (OpenCode has no shell hook at a session start), and its repeat of both calls is refused.

OpenCode installs ``@opencode-ai/plugin`` into each of its config folders in the background when it starts; the
tests run it with ``npm_config_offline=true`` so that install stays off the network (it fails, and OpenCode goes
on: the plugin `init` writes imports nothing but Node's own modules).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint_mcp.init.wrap import is_session_server, runs_checkpoint
from scripted_chat import ChatModel, serving

import nodetools
from .agents import (
    SECRET,
    TOKEN,
    Project,
    assert_refused_with_the_brief,
    assert_sent_once_and_journaled,
    init,
    mail_project,
    plain,
    plan,
    snapshot,
    undo,
)
from .entries import run_init
from support import headless

OPENCODE_TIMEOUT = 90
_CONNECTED = re.compile(r"✓\s+(\S+)\s+connected")


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with mail_project(tmp_path) as project:
        command, args, env = project.mailbox()
        servers = {
            "mailbox": {"type": "local", "command": [command, *args], "environment": env, "enabled": True},
            "billing": {
                "type": "remote",
                "url": project.billing.url,
                "headers": {"Authorization": "Bearer {env:BILLING_TOKEN}"},
                "enabled": True,
                "timeout": 12000,
            },
        }
        document = {"$schema": "https://opencode.ai/config.json", "mcp": servers}
        config(project).write_text(json.dumps(document, indent=2) + "\n")
        notes_command, notes_args, notes_env = project.notes_server()
        notes = {"type": "local", "command": [notes_command, *notes_args], "environment": notes_env}
        user_config(project).parent.mkdir(parents=True)
        user_config(project).write_text(json.dumps({"mcp": {"notes": notes}}, indent=2) + "\n")
        yield project


def config(project: Project) -> Path:
    return project.path / "opencode.json"


def user_config(project: Project) -> Path:
    return project.home / ".config" / "opencode" / "opencode.json"


def plugin(project: Project) -> Path:
    return project.path / ".opencode" / "plugin" / "checkpoint-brief.js"


def environment(project: Project, url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    """OpenCode's environment: the temporary HOME, no update, model list, LSP download or share; a provider of
    its own for the scripted model at ``url``, given by OPENCODE_CONFIG_CONTENT."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Scripted",
        "options": {"baseURL": url, "apiKey": "dummy"},
        "models": {"scripted": {"name": "Scripted", "tool_call": True}},
    }
    return {
        **project.base_env("OPENCODE"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_CONFIG_CONTENT": json.dumps({"provider": {"scripted": provider}, "model": "scripted/scripted"}),
        "npm_config_offline": "true",
        # `opencode run` works in $PWD, not in the folder it was started in.
        "PWD": str(project.path),
    }


def connected(project: Project) -> set[str]:
    """The servers ``opencode mcp list`` shows connected."""
    listing = headless(
        [str(nodetools.opencode()), "mcp", "list"], cwd=project.path, env=environment(project), timeout=OPENCODE_TIMEOUT
    )
    return set(_CONNECTED.findall(plain(listing)))


def session(project: Project, model: ChatModel) -> str:
    """One whole headless OpenCode session (``opencode run``) in the project, driven by ``model``."""
    with serving(model) as url:
        argv = [str(nodetools.opencode()), "run", "--format", "json", "Send Bob his invoice and bill him."]
        return headless(argv, cwd=project.path, env=environment(project, url), timeout=OPENCODE_TIMEOUT)


@pytest.mark.timeout(300)
def test_opencode_connects_to_every_wrapped_server_a_second_init_changes_nothing_and_undo_restores_every_byte(
    project: Project,
) -> None:
    assert connected(project) == {"mailbox", "billing", "notes"}
    files = (config(project), user_config(project), project.path / ".gitignore", plugin(project))
    before = snapshot(*files)

    done = init(project, "opencode", env=environment(project))
    assert f"wrapped (project scope, {config(project)}; the project's journal): mailbox, billing" in done.stderr
    assert f"wrapped (user scope, {user_config(project)}; each its own journal): notes" in done.stderr
    assert "wrote the plugin .opencode/plugin/checkpoint-brief.js" in done.stderr, done.stderr

    assert connected(project) == {"mailbox", "billing", "notes", "checkpoint-session"}
    servers = json.loads(config(project).read_text())["mcp"]
    mailbox, billing = servers["mailbox"], servers["billing"]
    assert runs_checkpoint({"command": mailbox["command"][0], "args": mailbox["command"][1:]})
    assert mailbox["environment"]["MAILBOX_KEY"] == SECRET
    assert SECRET not in json.dumps(mailbox["command"]), "the secret stays in the environment"
    assert billing["type"] == "local", "the proxy is a local server; it reaches the remote one"
    assert "url" not in billing
    upstream = [
        "--upstream-url",
        project.billing.url,
        "--upstream-header-env",
        "Authorization=CHECKPOINT_HEADER_AUTHORIZATION",
    ]
    assert billing["command"][-4:] == upstream
    assert billing["environment"] == {"CHECKPOINT_HEADER_AUTHORIZATION": "Bearer {env:BILLING_TOKEN}"}
    assert TOKEN not in json.dumps(billing), "OpenCode substitutes the token into the environment, not an argument"
    assert mailbox["timeout"] == 30000, "a wrapped entry without a timeout gets 30 s to list its tools, not 5"
    assert billing["timeout"] == 12000, "a timeout of the user's own is kept"
    session_entry = servers["checkpoint-session"]
    assert is_session_server({"command": session_entry["command"][0], "args": session_entry["command"][1:]})
    notes = json.loads(user_config(project).read_text())["mcp"]["notes"]
    assert str(project.user_journal("notes")) in notes["command"], "a user-scope server gets its own journal"
    assert "experimental.chat.system.transform" in plugin(project).read_text()

    written = snapshot(*files)
    again = init(project, "opencode", env=environment(project))
    assert "nothing to change" in again.stderr, again.stderr
    assert again.stdout == ""
    assert snapshot(*files) == written

    undo(project, environment(project))
    assert snapshot(*files) == before


@pytest.mark.timeout(300)
def test_a_send_in_an_opencode_session_is_journaled_once_and_its_repeat_in_a_new_session_is_refused_after_the_brief(
    project: Project,
) -> None:
    init(project, "opencode", env=environment(project))

    first = plan()
    session(project, first)
    assert_sent_once_and_journaled(project, first)

    again = plan()
    session(project, again)
    # The plugin adds the brief to the system prompt of the session's first request.
    system = "\n".join(str(m.get("content")) for m in again.sessions()[0]["messages"] if m.get("role") == "system")
    assert_refused_with_the_brief(project, again, system)


def test_an_opencode_file_with_comments_is_refused_by_name_and_nothing_is_written(project: Project) -> None:
    text = config(project).read_text().replace('"mcp": {', '"mcp": { // the servers\n', 1)
    config(project).write_text(text)
    done = run_init("--client", "opencode", "--project", str(project.path), env=environment(project))
    assert done.returncode == 1
    assert f"{config(project)}: holds comments (the first on line 3)" in done.stderr, done.stderr
    assert config(project).read_text() == text
    assert not plugin(project).exists()
