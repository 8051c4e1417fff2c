"""An approval gate through the real Claude Code CLI in `-p` mode, which declines elicitation: the operator path.

A project set up by `checkpoint init`, whose mail server's policy then says ``approve = "operator"`` for
send_email. In the first session the model's send is refused, and what the model is shown (Claude Code hands it
only the error's message) names the request, the exact approve command and what to do next. A person approves it;
in the next session (``--continue``) the brief tells the model the call is approved but not yet sent, the model
sends it again, and exactly one e-mail goes out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from scripted_model import ScriptedModel, ToolCall

from .claude_project import MAIL, SEND, Project, first_brief, mail_project, session
from support import checkpoint_argv


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """The mail project after `checkpoint init`, with send_email under ``approve = "operator"``."""
    made = mail_project(tmp_path)
    policy = made.path / ".checkpoint" / "policies" / "mailbox.toml"
    text = policy.read_text()
    table = '[tools."send_email"]' if '[tools."send_email"]' in text else "[tools.send_email]"
    assert table in text, text
    policy.write_text(text.replace(table, f'{table}\napprove = "operator"', 1))
    return made


def approve(journal: Path, approval_id: int) -> None:
    """A person approves the request with the command the model was shown (the real `checkpoint journal approve`)."""
    argv = checkpoint_argv("journal", "approve", "--journal", str(journal), str(approval_id))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert f"approval #{approval_id} granted" in done.stdout, done.stdout


@pytest.mark.timeout(120)
def test_claude_code_is_told_to_ask_for_approval_and_sends_the_approved_email_once(project: Project) -> None:
    journal = project.path / ".checkpoint" / "journal.db"
    asked = ScriptedModel([ToolCall(SEND, MAIL)])
    session(project, asked)

    assert project.sent() == [], "the e-mail went out without an approval"
    refusal = asked.tool_results()[-1]
    assert refusal.startswith("ERROR: "), refusal
    assert "Approval #1 is waiting" in refusal, refusal
    assert f"checkpoint journal approve --journal {journal} 1" in refusal, refusal
    assert "send the same call again" in refusal, refusal

    approve(journal, 1)
    resumed = ScriptedModel([ToolCall(SEND, MAIL)])
    session(project, resumed, "--continue")

    brief = first_brief(resumed)
    assert "Approved, not yet sent: #1 `send_email`" in brief, brief
    assert "send it again with the same arguments to run it (once)" in brief, brief
    exact = json.dumps(MAIL, separators=(",", ":"))
    assert json.dumps(exact)[1:-1] in brief, brief  # the exact arguments to send again (as JSON in the request)
    assert [mail["to"] for mail in project.sent()] == ["bob@example.com"]
    answer = resumed.tool_results()[-1]
    assert not answer.startswith("ERROR: "), answer
    assert "sent 'Your invoice' to bob@example.com" in answer, answer
