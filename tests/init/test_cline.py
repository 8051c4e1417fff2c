"""`checkpoint init --client cline`, judged by the real Cline CLI (npm ``cline``, pinned in tools/npm) in a temporary
HOME, with no login: its provider (``cline auth -p openai -b URL``) is a scripted Chat Completions model on loopback.

Cline keeps its servers in one file per user, ``~/.cline/data/settings/cline_mcp_settings.json``: a local mail
server (a secret in its ``env``) and a Streamable HTTP billing server whose bearer token is written in its
``headers``. Cline has no command that lists them: a session shows which started (their tools are offered to the
model). A second `init` changes nothing; ``--undo`` puts every file back byte for byte. Headless sessions
(``cline --json``): the first sends the e-mail and bills once, both journaled; the next is shown the brief by the
plugin `init` wrote in the project (a ``TaskStart`` hook's output reaches no model in Cline; a plugin's
``beforeRun`` ``appendContext`` does), and its repeat of both calls is refused.

``CLINE_SESSION_BACKEND_MODE=local`` keeps Cline from leaving a hub daemon on a port. Cline 3.0.65 looks up the
name of its telemetry collector whatever its settings say (``telemetryOptOut`` is set here); nothing else leaves
loopback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint_mcp.journal.base import CallState
from scripted_chat import ChatModel, serving

import nodetools
from .agents import (
    SECRET,
    TOKEN,
    Project,
    assert_refused_with_the_brief,
    init,
    mail_project,
    plan,
    snapshot,
    undo,
)
from support import headless, journal_states

CLINE_TIMEOUT = 120


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with mail_project(tmp_path) as project:
        command, args, env = project.mailbox()
        servers = {
            "mailbox": {"command": command, "args": args, "env": env, "disabled": False, "autoApprove": []},
            "billing": {
                "type": "streamableHttp",
                "url": project.billing.url,
                "headers": {"Authorization": f"Bearer {TOKEN}"},
                "disabled": False,
                "timeout": 90,
            },
        }
        settings(project).parent.mkdir(parents=True)
        settings(project).write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
        (settings(project).parent / "settings.json").write_text(json.dumps({"telemetryOptOut": True}))
        yield project


def settings(project: Project) -> Path:
    return project.home / ".cline" / "data" / "settings" / "cline_mcp_settings.json"


def plugin(project: Project) -> Path:
    return project.path / ".cline" / "plugins" / "checkpoint-brief.js"


def environment(project: Project) -> dict[str, str]:
    """Cline's environment: the temporary HOME, no hub daemon, no update."""
    return {
        **project.base_env("CLINE"),
        "CLINE_SESSION_BACKEND_MODE": "local",
        "CLINE_NO_AUTO_UPDATE": "1",
        "PWD": str(project.path),
    }


def cline(project: Project, *args: str) -> str:
    return headless([*nodetools.cline(), *args], cwd=project.path, env=environment(project), timeout=CLINE_TIMEOUT)


def session(project: Project, model: ChatModel) -> str:
    """One whole headless Cline session (``cline --json``) in the project, driven by ``model``."""
    with serving(model) as url:
        cline(project, "auth", "-p", "openai", "-b", url, "-k", "dummy", "-m", "scripted")
        return cline(project, "--json", "--cwd", str(project.path), "Send Bob his invoice and bill him.")


@pytest.mark.timeout(300)
def test_cline_s_servers_are_wrapped_with_their_own_journals_a_second_init_changes_nothing_and_undo_restores_every_byte(
    project: Project,
) -> None:
    files = (settings(project), project.path / ".gitignore", plugin(project))
    before = snapshot(*files)

    done = init(project, "cline", env=environment(project))
    assert f"wrapped (user scope, {settings(project)}; each its own journal): mailbox, billing" in done.stderr
    assert "wrote the plugin .cline/plugins/checkpoint-brief.js" in done.stderr, done.stderr

    servers = json.loads(settings(project).read_text())["mcpServers"]
    mailbox, billing, session_entry = servers["mailbox"], servers["billing"], servers["checkpoint-session"]
    assert mailbox["args"][mailbox["args"].index("--journal") + 1] == str(project.user_journal("mailbox"))
    assert SECRET not in json.dumps(mailbox["args"])
    assert mailbox["autoApprove"] == [], "every other key is kept"
    assert billing["type"] == "stdio"
    assert billing["env"] == {"CHECKPOINT_HEADER_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert TOKEN not in json.dumps(billing["args"])
    assert session_entry["timeout"] == 30, "Cline gives an entry without a timeout 3 s to connect"
    assert mailbox["timeout"] == 60, "a wrapped entry without a timeout gets Cline's request default, not 3 s to start"
    assert billing["timeout"] == 90, "a timeout of the user's own is kept"
    assert "env" not in session_entry, "a user file's session server names no project: Cline starts it in one"
    assert "beforeRun" in plugin(project).read_text()

    written = snapshot(*files)
    again = init(project, "cline", env=environment(project))
    assert "nothing to change" in again.stderr, again.stderr
    assert snapshot(*files) == written

    undo(project, environment(project))
    assert snapshot(*files) == before


@pytest.mark.timeout(300)
def test_a_wrapped_server_slower_to_start_than_cline_s_three_seconds_still_connects(project: Project) -> None:
    """Cline gives an entry without ``timeout`` 3 s to answer ``initialize``; `init` writes Cline's request default
    (60 s) on each wrapped entry without one, so a server that answers after 4 s (a proxy's start on a loaded
    machine) is offered to the model."""
    document = json.loads(settings(project).read_text())
    document["mcpServers"]["mailbox"]["env"]["MAILBOX_START_DELAY"] = "4"
    settings(project).write_text(json.dumps(document, indent=2) + "\n")
    init(project, "cline", env=environment(project))

    model = ChatModel([])
    session(project, model)
    assert "mailbox__send_email" in model.offered_names(), model.offered_names()


@pytest.mark.timeout(400)
def test_a_send_in_a_cline_session_is_journaled_once_and_its_repeat_in_a_new_session_is_refused_after_the_brief(
    project: Project,
) -> None:
    init(project, "cline", env=environment(project))

    first = plan()
    session(project, first)
    offered = first.offered_names()
    assert {"mailbox__send_email", "billing__send_email"} <= set(offered), offered
    assert any(name.startswith("checkpoint-session__") for name in offered), "the session server connected too"
    assert len(project.sent()) == 1, first.tool_results()
    # Cline's servers are the user's: each writes its own journal.
    project_journal = project.path / ".checkpoint" / "journal.db"
    assert not project_journal.exists()
    assert journal_states(str(project.user_journal("mailbox")), "mailbox") == {1: CallState.COMPLETED}
    assert journal_states(str(project.user_journal("billing")), "billing") == {1: CallState.COMPLETED}
    assert [call["auth"] for call in project.billed()] == [f"Bearer {TOKEN}"]

    again = plan()
    session(project, again)
    assert "<hook_context" in again.first_prompt(), "the plugin's context reached the model"
    assert_refused_with_the_brief(project, again, again.first_prompt())
