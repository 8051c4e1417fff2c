"""Protected out of the box: the real Claude Code CLI, driven through whole headless sessions by a scripted model,
in a project set up with nothing but `checkpoint init`.

Each scenario is what a resumed model does: send the same e-mail again in a new session, send it again reworded,
or carry on with `--continue` after Claude Code was killed while the e-mail was in flight. The mail server's
outbox (``sent.jsonl``) is the truth: exactly one e-mail every time, and the first request the model receives in
the later session holds the brief naming the call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripted_model import ScriptedModel, ToolCall, serving

import nodetools
from .entries import run_init
from support import headless

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
SEND = "mcp__mailbox__send_email"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}
BRIEF = "SessionStart hook additional context"


@dataclass
class Project:
    path: Path
    home: Path
    outbox: Path
    hold: Path

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git project whose `.mcp.json` names one mail server, after a plain `checkpoint init`."""
    path = tmp_path / "project"
    path.mkdir()
    git = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env={**os.environ, **git}, check=True, timeout=30)
    mailbox = tmp_path / "mailbox"
    hold = tmp_path / "release"
    entry = {"command": sys.executable, "args": [str(MAILBOX)], "env": {"MAILBOX_DIR": str(mailbox)}}
    entry["env"]["MAILBOX_HOLD"] = str(hold)
    (path / ".mcp.json").write_text(json.dumps({"mcpServers": {"mailbox": entry}}, indent=2))
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    done = run_init("--project", str(path))
    assert done.returncode == 0, done.stderr
    hold.touch()  # calls answer at once unless a test removes it
    return Project(path, home, mailbox / "sent.jsonl", hold)


def claude(project: Project, url: str, prompt: str, *flags: str) -> list[str]:
    """`claude -p PROMPT` in the project against the scripted model at ``url``: its argv and environment."""
    return [str(nodetools.claude()), "-p", prompt, "--output-format", "stream-json", "--verbose", *flags]


def environment(project: Project, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    return {
        **env,
        "HOME": str(project.home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "MCP_TIMEOUT": "60000",
    }


def session(project: Project, model: ScriptedModel, *flags: str) -> str:
    """One whole headless session of Claude Code, driven by ``model``; its stream-json output."""
    with serving(model) as url:
        argv = claude(project, url, "Send Bob his invoice.", "--allowedTools", "mcp__mailbox", *flags)
        env = environment(project, url)
        return headless(argv, cwd=project.path, env=env, timeout=60, saw=f"model saw: {model.tool_results()}")


def first_brief(model: ScriptedModel) -> str:
    """The SessionStart brief of this session in the first request the model received (the last one in it: a
    conversation resumed with --continue also carries the earlier session's)."""
    text = json.dumps(model.requests[0])
    at = text.rfind(BRIEF)
    assert at >= 0, "the brief never reached the model"
    return text[at : at + 4000]


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
