"""Protected out of the box: the real Claude Code CLI, driven through whole headless sessions by a scripted model,
in a project set up with nothing but `checkpoint init`.

Each scenario is what a resumed model does: send the same e-mail again in a new session, send it again reworded,
or carry on with `--continue` after Claude Code was killed while the e-mail was in flight. The mail server's
outbox (``sent.jsonl``) is the truth: exactly one e-mail every time, and the first request the model receives in
the later session holds the brief naming the call.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from scripted_model import ScriptedModel, ToolCall, serving

from .claude_project import MAIL, SEND, Project, claude, environment, first_brief, mail_project, session


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git project whose `.mcp.json` names one mail server, after a plain `checkpoint init`."""
    return mail_project(tmp_path)


@pytest.mark.timeout(120)
def test_a_repeated_send_in_a_new_session_sends_one_email_and_the_brief_names_it(project: Project) -> None:
    session(project, ScriptedModel([ToolCall(SEND, MAIL)]))
    assert len(project.sent()) == 1

    again = ScriptedModel([ToolCall(SEND, MAIL)])
    session(project, again)

    assert len(project.sent()) == 1, project.sent()
    brief = first_brief(again)
    assert "send_email" in brief, brief
    refusal = again.tool_results()[-1]
    assert refusal.startswith("ERROR: "), refusal
    assert "send_email" in refusal, refusal
    assert "already ran" in refusal, refusal


@pytest.mark.timeout(120)
def test_a_reworded_send_under_a_match_rule_sends_one_email(project: Project) -> None:
    policy = project.path / ".checkpoint" / "policies" / "mailbox.toml"
    text = policy.read_text()
    assert '[tools."send_email"]' in text or "[tools.send_email]" in text, text
    # What the written policy's comment invites a user to do: the e-mail's identity is its recipient and subject.
    table = '[tools."send_email"]' if '[tools."send_email"]' in text else "[tools.send_email]"
    policy.write_text(text.replace(table, f'{table}\nmatch = ["/to", "/subject"]', 1))

    session(project, ScriptedModel([ToolCall(SEND, MAIL)]))
    reworded = {**MAIL, "body": "Hello Bob! As promised, here is your invoice. Best, Alice"}
    again = ScriptedModel([ToolCall(SEND, reworded)])
    session(project, again)

    assert [mail["body"] for mail in project.sent()] == [MAIL["body"]]
    refusal = again.tool_results()[-1]
    assert refusal.startswith("ERROR: "), refusal
    assert "/body: " in refusal, refusal


@pytest.mark.timeout(120)
def test_claude_code_killed_mid_call_then_continue_sends_one_email(project: Project) -> None:
    project.hold.unlink()  # the mail goes out, then the answer waits
    model = ScriptedModel([ToolCall(SEND, MAIL)])
    with serving(model) as url:
        child = subprocess.Popen(
            claude(project, url, "Send Bob his invoice.", "--allowedTools", "mcp__mailbox"),
            cwd=project.path,
            env=environment(project, url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not project.sent() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert project.sent(), "the mail was never sent"
        os.killpg(child.pid, signal.SIGKILL)  # Claude Code, its proxy and the mail server: a crash
        child.wait(timeout=30)
    project.hold.touch()

    resumed = ScriptedModel([ToolCall(SEND, MAIL)])
    session(project, resumed, "--continue")

    assert len(project.sent()) == 1, project.sent()
    brief = first_brief(resumed)
    assert "send_email" in brief, brief
    assert "doubt" in brief, brief
    answer = resumed.tool_results()[-1]
    assert answer.startswith("ERROR: "), answer
