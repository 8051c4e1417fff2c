"""`checkpoint init --client qwen`, judged by the real Qwen Code CLI (npm ``@qwen-code/qwen-code``, pinned in
tools/npm, on Node 22) in a temporary HOME, with no login: ``--auth-type openai`` and ``OPENAI_BASE_URL`` name a
scripted Chat Completions model on loopback.

The project's ``.qwen/settings.json`` (Gemini CLI's shape) names a stdio mail server (a secret in ``env``) and a
Streamable HTTP billing server whose bearer token comes from ``$BILLING_TOKEN``; the user's ``~/.qwen/settings.json``
has a server of its own. Qwen starts a project's server only once the user approves it, by a hash of its entry: the
servers `init` rewrote are pending again, and `init` says how to approve them (``qwen mcp approve <name>``), which
the test then does, as the user would; ``qwen mcp list`` shows them connected. A second `init` changes nothing;
``--undo`` puts every file back byte for byte. Headless sessions (``qwen -p``, every tool allowed): the first sends
the e-mail and bills once, both journaled; the next is shown the brief by the SessionStart hook `init` added, and
its repeat of both calls is refused. Qwen offers MCP tools deferred (``tool_search``, then ``tool_call``), as the
scripted model uses them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

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
from support import headless

QWEN_TIMEOUT = 120
USER_SETTINGS = {"privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}
_STATUS = re.compile(r"^\S*\s*(\S+): .* - (Connected|Disconnected|Pending approval)", re.MULTILINE)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with mail_project(tmp_path) as project:
        command, args, env = project.mailbox()
        servers = {
            "mailbox": {"command": command, "args": args, "env": env, "timeout": 30000},
            "billing": {
                "httpUrl": project.billing.url,
                "headers": {"Authorization": "Bearer $BILLING_TOKEN"},
                "timeout": 30000,
            },
        }
        settings(project).parent.mkdir(parents=True)
        settings(project).write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
        notes_command, notes_args, notes_env = project.notes_server()
        notes = {"command": notes_command, "args": notes_args, "env": notes_env}
        user_settings(project).parent.mkdir(parents=True)
        user_settings(project).write_text(json.dumps({**USER_SETTINGS, "mcpServers": {"notes": notes}}, indent=2))
        yield project


def settings(project: Project) -> Path:
    return project.path / ".qwen" / "settings.json"


def user_settings(project: Project) -> Path:
    return project.home / ".qwen" / "settings.json"


def environment(project: Project, url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    """Qwen's environment: the temporary HOME, Node 22 first on PATH, the scripted model at ``url``."""
    base = {**project.base_env("QWEN", "OPENAI_", "GEMINI"), "PATH": nodetools.env()["PATH"]}
    return {
        **base,
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": "dummy",
        "OPENAI_MODEL": "scripted",
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        "PWD": str(project.path),
    }


def qwen(project: Project, *args: str, url: str = "http://127.0.0.1:9/v1") -> str:
    env = environment(project, url)
    return headless([*nodetools.qwen(), *args], cwd=project.path, env=env, timeout=QWEN_TIMEOUT)


def statuses(project: Project) -> dict[str, str]:
    """``qwen mcp list``: each server's status (Connected, Disconnected, Pending approval)."""
    return dict(_STATUS.findall(plain(qwen(project, "mcp", "list"))))


def approve(project: Project, *names: str) -> None:
    for name in names:
        assert f'Approved MCP server "{name}"' in qwen(project, "mcp", "approve", name)


def session(project: Project, model: ChatModel) -> str:
    """One whole headless Qwen session (``qwen -p``, every tool allowed) in the project, driven by ``model``."""
    with serving(model) as url:
        args = ("--auth-type", "openai", "--approval-mode", "yolo", "-p", "Send Bob his invoice and bill him.")
        return qwen(project, *args, url=url)


@pytest.mark.timeout(300)
def test_qwen_connects_to_the_wrapped_servers_once_approved_as_init_says_a_second_init_changes_nothing_and_undo_restores(
    project: Project,
) -> None:
    approve(project, "mailbox", "billing")
    assert statuses(project) == {"mailbox": "Connected", "billing": "Connected", "notes": "Connected"}
    files = (settings(project), user_settings(project), project.path / ".gitignore")
    before = snapshot(*files)

    done = init(project, "qwen", env=environment(project))
    assert f"wrapped (project scope, {settings(project)}; the project's journal): mailbox, billing" in done.stderr
    assert f"wrapped (user scope, {user_settings(project)}; each its own journal): notes" in done.stderr
    assert "run `qwen mcp approve <name>`" in done.stderr, done.stderr
    assert "mailbox, billing, checkpoint-session" in done.stderr, done.stderr
    pending = statuses(project)
    assert pending["mailbox"] == pending["billing"] == "Pending approval", "a rewritten entry is pending again"

    approve(project, "mailbox", "billing", "checkpoint-session")
    assert statuses(project) == {
        "mailbox": "Connected",
        "billing": "Connected",
        "notes": "Connected",
        "checkpoint-session": "Connected",
    }
    written = json.loads(settings(project).read_text())
    mailbox, billing = written["mcpServers"]["mailbox"], written["mcpServers"]["billing"]
    assert SECRET not in json.dumps(mailbox["args"])
    assert "httpUrl" not in billing
    assert billing["env"] == {"CHECKPOINT_HEADER_AUTHORIZATION": "Bearer $BILLING_TOKEN"}
    assert TOKEN not in json.dumps(written)
    [group] = written["hooks"]["SessionStart"]
    assert " brief --hook --project-root " in group["hooks"][0]["command"]

    snapshot_after = snapshot(*files)
    again = init(project, "qwen", env=environment(project))
    assert "nothing to change" in again.stderr, again.stderr
    assert snapshot(*files) == snapshot_after

    undo(project, environment(project))
    assert snapshot(*files) == before


@pytest.mark.timeout(400)
def test_a_send_in_a_qwen_session_is_journaled_once_and_its_repeat_in_a_new_session_is_refused_after_the_brief(
    project: Project,
) -> None:
    init(project, "qwen", env=environment(project))
    approve(project, "mailbox", "billing", "checkpoint-session")

    first = plan()
    session(project, first)
    assert_sent_once_and_journaled(project, first)

    again = plan()
    session(project, again)
    prompt = again.first_prompt()
    assert "SessionStart additional context" in prompt
    assert_refused_with_the_brief(project, again, prompt)
