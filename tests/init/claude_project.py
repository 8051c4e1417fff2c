"""A project for whole headless sessions of the real Claude Code CLI, driven by a scripted model: a git project
whose `.mcp.json` names one mail server (``servers/mailbox_server.py``), set up by a plain `checkpoint init`;
its outbox (``sent.jsonl``) is the truth about what was sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from scripted_model import ScriptedModel, serving

import nodetools
from .entries import run_init
from support import headless

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
SEND = "mcp__mailbox__send_email"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}
BRIEF = "SessionStart hook additional context"


@dataclass
class Project:
    """The project folder, Claude Code's HOME, the mail server's outbox, and the file whose absence holds a send."""

    path: Path
    home: Path
    outbox: Path
    hold: Path

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]


def mail_project(tmp_path: Path) -> Project:
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
    """Claude Code's environment: the project's HOME, the scripted model's URL, no traffic of its own."""
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
