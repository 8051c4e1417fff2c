"""Many sessions, one project (issue 42), after a plain `checkpoint init`, each client a real process whose hooks run
through ``/bin/sh`` and whose servers are its children (``client_sessions``), on the mail server (its outbox is the
truth about what was sent). Both sides are counted: legitimate repeats refused, side effects done twice.

* two Claude Code sessions at once both have their servers; a ``/clear`` in one leaves the other's own repeats
  running and catches its own; a repeat across them is caught;
* Claude Code and Cursor on one project both start, and a repeat across them is caught;
* Claude Desktop (no hook, one proxy for every chat) does not send an e-mail twice silently across chats, and lets a
  legitimate repeat through on the next send;
* VS Code's SessionStart hook brings the brief and the boundary of each chat.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal.records import CallState

from .agent_sessions import Outcome, Tally
from .client_sessions import BRIEF, ClaudeCode, VsCode, claude_desktop, clean_environment, cursor_session
from .entries import run_init
from support import journal_calls

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
REPEAT_REFUSED = -31089


def mail(to: str) -> dict[str, str]:
    return {"to": to, "subject": f"Invoice for {to}", "body": f"Hi {to}, your invoice is attached."}


class Mailbox:
    """The mail server's entry, and its outbox."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def entry(self) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(MAILBOX)], "env": {"MAILBOX_DIR": str(self.folder)}}

    def sent(self, to: str) -> int:
        path = self.folder / "sent.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return sum(1 for line in lines if json.loads(line)["to"] == to)


def init(project: Path, env: dict[str, str], *args: str) -> str:
    done = run_init("--project", str(project), "--list-timeout", "60", *args, env=env)
    assert done.returncode == 0, done.stderr
    return done.stderr


def caught(what: str, outcome: Outcome) -> None:
    """A repeat the protection must catch: refused with the repeat's error, nothing sent."""
    assert outcome.code == REPEAT_REFUSED, f"{what}: {outcome}"


@pytest.fixture
def setting(tmp_path: Path) -> tuple[Path, Mailbox, dict[str, str]]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    return project, Mailbox(tmp_path / "mail"), clean_environment(home)


def test_two_claude_code_sessions_at_once_each_keep_their_memory_and_a_repeat_across_them_is_caught(
    setting: tuple[Path, Mailbox, dict[str, str]],
) -> None:
    project, mailbox, env = setting
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"mailbox": mailbox.entry()}}))
    init(project, env)
    tally = Tally()
    with ClaudeCode.session("terminal A", project, env) as a, ClaudeCode.session("terminal B", project, env) as b:
        tally.meant("A sends Ann her invoice", a.call("mailbox", "send_email", mail("ann")))
        tally.meant("B sends Bob his invoice", b.call("mailbox", "send_email", mail("bob")))
        a.clear()  # A's conversation is gone; B's is not
        tally.meant("B's own second send to Bob (after A's /clear)", b.call("mailbox", "send_email", mail("bob")))
        caught("A resends Ann's invoice after its /clear", a.call("mailbox", "send_email", mail("ann")))
        caught("B sends A's mail to Ann", b.call("mailbox", "send_email", mail("ann")))
        tally.meant("A's own second send to Carol", a.call("mailbox", "send_email", mail("carol")))
        tally.meant("A's own second send to Carol", a.call("mailbox", "send_email", mail("carol")))
    tally.effects("Ann's invoice", mailbox.sent("ann"), 1)
    tally.effects("Bob's invoice", mailbox.sent("bob"), 2)
    tally.effects("Carol's invoice", mailbox.sent("carol"), 2)
    tally.assert_clean()
    rows = journal_calls(str(project / ".checkpoint" / "journal.db"), "mailbox")
    assert len(rows) == 5
    assert all(row.state is CallState.COMPLETED for row in rows)


def test_claude_code_and_cursor_on_one_project_both_start_and_a_repeat_across_them_is_caught(
    setting: tuple[Path, Mailbox, dict[str, str]],
) -> None:
    project, mailbox, env = setting
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"mailbox": mailbox.entry()}}))
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"mailbox": mailbox.entry()}}))
    init(project, env)
    init(project, env, "--client", "cursor")
    tally = Tally()
    with ClaudeCode.session("Claude Code", project, env) as claude, cursor_session("Cursor", project, env) as cursor:
        tally.meant("Claude Code sends Ann her invoice", claude.call("mailbox", "send_email", mail("ann")))
        caught("Cursor sends Ann's invoice again", cursor.call("mailbox", "send_email", mail("ann")))
        tally.meant("Cursor sends Bob his invoice", cursor.call("mailbox", "send_email", mail("bob")))
        tally.meant("Cursor's own second send to Bob", cursor.call("mailbox", "send_email", mail("bob")))
        caught("Claude Code sends Cursor's mail to Bob", claude.call("mailbox", "send_email", mail("bob")))
    tally.effects("Ann's invoice", mailbox.sent("ann"), 1)
    tally.effects("Bob's invoice", mailbox.sent("bob"), 2)
    tally.assert_clean()


def test_claude_desktop_asks_before_an_email_goes_out_twice_across_chats_and_a_legitimate_repeat_runs_when_sent_again(
    setting: tuple[Path, Mailbox, dict[str, str]],
) -> None:
    project, mailbox, env = setting
    config = Path(env["XDG_CONFIG_HOME"]) / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"mcpServers": {"mailbox": mailbox.entry()}}))
    summary = init(project, env, "--client", "claude-desktop")
    assert "sessions: Claude Desktop runs no hooks" in summary, summary
    tally = Tally()
    with claude_desktop("Claude Desktop", config, env, project) as desktop:
        # Chat 1 sends Ann her invoice. Chat 2, whose agent knows nothing of chat 1, sends it again: asked, not sent.
        tally.meant("chat 1 sends Ann her invoice", desktop.call("mailbox", "send_email", mail("ann")))
        asked = desktop.call("mailbox", "send_email", mail("ann"))
        caught("chat 2 sends Ann's invoice again", asked)
        assert "already ran" in asked.text
        assert "sent 'Invoice for ann' to ann" in asked.text, asked.text  # what happened, to decide on
        assert "send this call again" in asked.text
        # Chat 3 really means to send Bob a second invoice: asked once, it runs when sent again.
        tally.meant("chat 3 sends Bob his invoice", desktop.call("mailbox", "send_email", mail("bob")))
        once = desktop.call("mailbox", "send_email", mail("bob"))
        assert once.code == REPEAT_REFUSED, once
        tally.meant(
            "chat 3 sends Bob's second invoice again, as it was told",
            desktop.call("mailbox", "send_email", mail("bob")),
        )
    tally.effects("Ann's invoice", mailbox.sent("ann"), 1)
    tally.effects("Bob's invoice", mailbox.sent("bob"), 2)
    tally.assert_clean()


def test_vscode_s_hook_brings_the_brief_to_each_chat_and_marks_where_it_begins(
    setting: tuple[Path, Mailbox, dict[str, str]],
) -> None:
    project, mailbox, env = setting
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"mailbox": mailbox.entry()}}))
    summary = init(project, env, "--client", "vscode")
    assert "wrote the SessionStart agent hook .github/hooks/checkpoint-session-start.json" in summary, summary
    tally = Tally()
    with VsCode.window("VS Code", project, env) as code:
        first = code.new_chat()
        assert BRIEF not in first  # nothing was done yet
        tally.meant("chat 1 sends Ann her invoice", code.call("mailbox", "send_email", mail("ann")))
        tally.meant("chat 1's own second send to Ann", code.call("mailbox", "send_email", mail("ann")))
        second = code.new_chat()
        assert BRIEF in second, second
        assert "`send_email`" in second.split(BRIEF)[1]
        caught("chat 2 sends Ann's invoice again", code.call("mailbox", "send_email", mail("ann")))
        tally.meant("chat 2 sends Bob his invoice", code.call("mailbox", "send_email", mail("bob")))
        tally.meant("chat 2's own second send to Bob", code.call("mailbox", "send_email", mail("bob")))
    tally.effects("Ann's invoice", mailbox.sent("ann"), 2)
    tally.effects("Bob's invoice", mailbox.sent("bob"), 2)
    tally.assert_clean()
