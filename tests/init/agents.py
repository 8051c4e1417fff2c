"""What the end-to-end tests of the agent CLIs that speak Chat Completions share (OpenCode, GitHub Copilot CLI,
Cline, Qwen Code): a git project and a temporary HOME, the mail server (``servers/mailbox_server.py``, a secret in
its environment; its outbox is the truth about what was sent), the billing server over Streamable HTTP that
answers only with a bearer token (``servers/http_faults_server.py``; what it received is the truth about what was
billed), the plan of one session, and the facts a test reads afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.base import CallState
from scripted_chat import ChatModel, McpCall

from .entries import run_init
from httpservers import HttpServer, faults_server
from support import journal_states

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}
SECRET = "s3cret-mail-key"
TOKEN = "billing-token-42"
BRIEF = "## Side effects (journal)"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Project:
    """The project, HOME, the mail server's outbox and hold file, the billing server, a notes server's folder."""

    path: Path
    home: Path
    outbox: Path
    hold: Path
    billing: HttpServer
    effects: Path
    notes: Path

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]

    def billed(self) -> list[dict[str, Any]]:
        """The billing server's tools/call requests, each with the Authorization it came with."""
        lines = self.effects.read_text().splitlines() if self.effects.exists() else []
        received = [json.loads(line) for line in lines]
        return [r for r in received if r.get("event") == "received" and r.get("method") == "tools/call"]

    def mailbox(self) -> tuple[str, list[str], dict[str, str]]:
        """The mail server's command, arguments and environment (the secret in it)."""
        env = {"MAILBOX_DIR": str(self.outbox.parent), "MAILBOX_KEY": SECRET, "MAILBOX_HOLD": str(self.hold)}
        return sys.executable, [str(MAILBOX)], env

    def notes_server(self) -> tuple[str, list[str], dict[str, str]]:
        """A user-scope server (another mailbox, of its own folder)."""
        return sys.executable, [str(MAILBOX)], {"MAILBOX_DIR": str(self.notes)}

    @property
    def journal(self) -> str:
        return str(self.path / ".checkpoint" / "journal.db")

    def user_journal(self, server: str) -> Path:
        return self.home / ".local" / "share" / "checkpoint" / f"{server}.db"

    def base_env(self, *drop: str) -> dict[str, str]:
        """The environment of a CLI here: the temporary HOME and data folder, the billing token, no variable of
        the machine's that starts with one of ``drop``."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", *drop))}
        return {
            **keep,
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "BILLING_TOKEN": TOKEN,
        }


@contextmanager
def mail_project(tmp_path: Path) -> Iterator[Project]:
    """A git project, a HOME, and the billing server running; calls of the mail server answer at once unless a
    test removes the hold file."""
    path, home = tmp_path / "project", tmp_path / "home"
    path.mkdir()
    home.mkdir()
    git = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env={**os.environ, **git}, check=True, timeout=30)
    hold = tmp_path / "release"
    hold.touch()
    with faults_server(tmp_path, "--require-authorization", f"Bearer {TOKEN}") as billing:
        yield Project(
            path, home, tmp_path / "mail" / "sent.jsonl", hold, billing, tmp_path / "effects.jsonl", tmp_path / "notes"
        )


def init(
    project: Project, client: str, *args: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`checkpoint init --client CLIENT` in the project, with the CLI's HOME; it must succeed."""
    done = run_init("--client", client, "--project", str(project.path), *args, env=env or project.base_env())
    assert done.returncode == 0, done.stderr
    return done


def undo(project: Project, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = run_init("--undo", "--project", str(project.path), env=env or project.base_env())
    assert done.returncode == 0, done.stderr
    return done


def snapshot(*paths: Path) -> dict[Path, bytes | None]:
    """Each file's bytes (None: absent)."""
    return {path: path.read_bytes() if path.exists() else None for path in paths}


def plain(text: str) -> str:
    """A CLI's output without its colours."""
    return _ANSI.sub("", text)


def plan() -> ChatModel:
    """One session's plan: send Bob his invoice, then bill him."""
    return ChatModel([McpCall("mailbox", "send_email", MAIL), McpCall("billing", "send_email", {"to": "bob"})])


def assert_sent_once_and_journaled(project: Project, model: ChatModel) -> None:
    """The first session sent one e-mail and billed once (with the token the header carried), each journaled."""
    assert len(project.sent()) == 1, (model.tool_results(), model.offered_names())
    assert journal_states(project.journal, "mailbox") == {1: CallState.COMPLETED}
    assert journal_states(project.journal, "billing") == {1: CallState.COMPLETED}
    assert [call["auth"] for call in project.billed()] == [f"Bearer {TOKEN}"], "the token came through the env"


def assert_refused_with_the_brief(project: Project, model: ChatModel, prompt: str) -> None:
    """A new session was shown the brief naming the e-mail before its first turn, and its repeat of both calls
    was refused: still one e-mail, one bill."""
    assert BRIEF in prompt, f"the brief never reached the model: {prompt[-3000:]}"
    brief = prompt[prompt.index(BRIEF) :]
    assert "`send_email`" in brief, brief
    assert "(workflow `mailbox`)" in brief, brief
    assert len(project.sent()) == 1, project.sent()
    assert len(project.billed()) == 1, project.billed()
    refusals = [text for text in model.tool_results() if "already ran" in text]
    assert len(refusals) == 2, model.tool_results()
