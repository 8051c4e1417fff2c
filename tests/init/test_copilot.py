"""`checkpoint init --client copilot`, judged by the real GitHub Copilot CLI (npm ``@github/copilot``, pinned in
tools/npm) in a temporary HOME, offline (``COPILOT_OFFLINE``, no login) but for a scripted Chat Completions model on
loopback given as its own provider (``COPILOT_PROVIDER_BASE_URL``).

The project's ``.github/mcp.json`` names a local mail server (a secret in its ``env``) and an HTTP billing server
whose bearer token is written in its ``headers``; the user's ``~/.copilot/mcp-config.json`` has a server of its own,
and ``~/.copilot/config.json`` trusts the project (Copilot reads a project's servers and hooks only then).
``copilot mcp list --json`` (configuration, no status) shows what Copilot will start, before and after `init`; a
session shows they started (their tools are offered). A second `init` changes nothing; ``--undo`` puts every file
back byte for byte. Headless sessions (``copilot -p``): the first sends the e-mail and bills once, both journaled;
the next is shown the brief by the ``sessionStart`` hook `init` wrote (``{"additionalContext": …}``, the one output
Copilot hands the model under ``-p``), and its repeat of both calls is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    plan,
    snapshot,
    undo,
)
from support import headless

COPILOT_TIMEOUT = 90


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with mail_project(tmp_path) as project:
        command, args, env = project.mailbox()
        servers = {
            "mailbox": {"type": "local", "command": command, "args": args, "env": env, "tools": ["*"]},
            "billing": {
                "type": "http",
                "url": project.billing.url,
                "headers": {"Authorization": f"Bearer {TOKEN}"},
                "tools": ["*"],
            },
        }
        config(project).parent.mkdir(parents=True)
        config(project).write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
        notes_command, notes_args, notes_env = project.notes_server()
        notes = {"type": "local", "command": notes_command, "args": notes_args, "env": notes_env, "tools": ["*"]}
        user_config(project).parent.mkdir(parents=True)
        user_config(project).write_text(json.dumps({"mcpServers": {"notes": notes}}, indent=2) + "\n")
        # What a user does once when Copilot asks: trust the project folder.
        trust = {"trustedFolders": [str(project.path)]}
        (project.home / ".copilot" / "config.json").write_text(json.dumps(trust))
        yield project


def config(project: Project) -> Path:
    return project.path / ".github" / "mcp.json"


def user_config(project: Project) -> Path:
    return project.home / ".copilot" / "mcp-config.json"


def hook_file(project: Project) -> Path:
    return project.path / ".github" / "hooks" / "checkpoint-brief.json"


def environment(project: Project, url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    """Copilot's environment: the temporary HOME, offline, no update, a provider of its own at ``url``."""
    return {
        **project.base_env("COPILOT", "GH_", "GITHUB_"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PROVIDER_BASE_URL": url,
        "COPILOT_PROVIDER_API_KEY": "dummy",
        "COPILOT_MODEL": "scripted",
        "PWD": str(project.path),
    }


def listed(project: Project) -> dict[str, dict[str, Any]]:
    """``copilot mcp list --json`` in the project: every server Copilot would start, by name."""
    out = headless(
        [str(nodetools.copilot()), "mcp", "list", "--json"], cwd=project.path, env=environment(project), timeout=60
    )
    servers: dict[str, dict[str, Any]] = json.loads(out)["mcpServers"]
    return servers


def session(project: Project, model: ChatModel) -> str:
    """One whole headless Copilot session (``copilot -p``) in the project, driven by ``model``."""
    with serving(model) as url:
        argv = [str(nodetools.copilot()), "-p", "Send Bob his invoice and bill him.", "--allow-all-tools"]
        return headless(argv, cwd=project.path, env=environment(project, url), timeout=COPILOT_TIMEOUT)


@pytest.mark.timeout(300)
def test_copilot_lists_the_wrapped_servers_a_second_init_changes_nothing_and_undo_restores_every_byte(
    project: Project,
) -> None:
    before_listing = listed(project)
    assert before_listing["mailbox"]["command"] == before_listing["notes"]["command"]
    assert before_listing["billing"]["type"] == "http"
    files = (config(project), user_config(project), project.path / ".gitignore", hook_file(project))
    before = snapshot(*files)

    done = init(project, "copilot", env=environment(project))
    assert f"wrapped (project scope, {config(project)}; the project's journal): mailbox, billing" in done.stderr
    assert f"wrapped (user scope, {user_config(project)}; each its own journal): notes" in done.stderr
    assert "trust" in done.stderr, "init says Copilot reads the project's files only in a trusted folder"

    after = listed(project)
    mailbox, billing = after["mailbox"], after["billing"]
    assert runs_checkpoint(mailbox)
    assert mailbox["env"]["MAILBOX_KEY"] == SECRET
    assert SECRET not in json.dumps(mailbox["args"])
    assert billing["type"] == "local", "the proxy is a local server; it reaches the HTTP one"
    assert billing["args"][-4:] == [
        "--upstream-url",
        project.billing.url,
        "--upstream-header-env",
        "Authorization=CHECKPOINT_HEADER_AUTHORIZATION",
    ]
    assert billing["env"] == {"CHECKPOINT_HEADER_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert TOKEN not in json.dumps(billing["args"])
    assert is_session_server(after["checkpoint-session"])
    assert after["checkpoint-session"]["tools"] == ["*"]
    assert str(project.user_journal("notes")) in after["notes"]["args"], "a user-scope server gets its own journal"
    hooks = json.loads(hook_file(project).read_text())["hooks"]["sessionStart"]
    assert [hook["bash"].split(" brief ")[1].split(" --project-root")[0] for hook in hooks] == [
        "--hook --hook-format copilot"
    ]

    written = snapshot(*files)
    again = init(project, "copilot", env=environment(project))
    assert "nothing to change" in again.stderr, again.stderr
    assert snapshot(*files) == written

    undo(project, environment(project))
    assert snapshot(*files) == before


@pytest.mark.timeout(300)
def test_a_send_in_a_copilot_session_is_journaled_once_and_its_repeat_in_a_new_session_is_refused_after_the_brief(
    project: Project,
) -> None:
    init(project, "copilot", env=environment(project))

    first = plan()
    session(project, first)
    offered = first.offered_names()
    assert {"mailbox-send_email", "billing-send_email"} <= set(offered), offered
    assert any(name.startswith("checkpoint-session-") for name in offered), offered
    assert_sent_once_and_journaled(project, first)

    again = plan()
    session(project, again)
    assert_refused_with_the_brief(project, again, again.first_prompt())
