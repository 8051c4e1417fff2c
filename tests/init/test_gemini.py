"""`checkpoint init --client gemini`, judged by the real Gemini CLI (npm ``@google/gemini-cli``, pinned in
tools/npm) in a temporary HOME, offline but for a scripted model on loopback.

The project's ``.gemini/settings.json`` names a stdio mail server (a secret in ``env``, a relative script path
run in ``cwd``) and a Streamable HTTP server that answers only with a bearer token and a tenant header.
``gemini mcp list`` shows both Connected before `init` and after it; a second `init` changes nothing; ``--undo``
puts every file back byte for byte. The user's ``~/.gemini/settings.json`` has a server of its own, wrapped with
its own journal. Headless sessions (``gemini -p``): the model sends one e-mail in the first; in the second the
same call is refused under the policy `init` wrote, and the brief reached the model; after Gemini is killed
with the e-mail in flight, the next session's brief says it is in doubt and the call is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scripted_gemini import ScriptedGemini, serving
from scripted_model import ToolCall

import nodetools
from .entries import run_init
from support import headless

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
SEND = "mcp_mailbox_send_email"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}
MAIL_SECRET = "mail-s3cret-value"
PAY_SECRET = "pay-s3cret-value"
TENANT = "acme"
GEMINI_TIMEOUT = 90  # seconds one `gemini` command may take
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


class _Billing(BaseHTTPRequestHandler):
    """A Streamable HTTP MCP server (JSON answers, no session) with one read-only tool, that answers 401 unless
    both the bearer token and the tenant header came; records the headers of every request."""

    seen: list[dict[str, str]]

    def do_POST(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.seen.append(headers)
        body = json.loads(self.rfile.read(int(headers.get("content-length") or 0)) or b"{}")
        if headers.get("authorization") != f"Bearer {PAY_SECRET}" or headers.get("x-tenant") != TENANT:
            self._send(401, {"error": "unauthorized"})
            return
        if "id" not in body:
            self._send(202, None)
            return
        method = body.get("method")
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "billing", "version": "1"},
            }
        elif method == "tools/list":
            tool = {
                "name": "invoice_total",
                "description": "The total of an invoice.",
                "inputSchema": {"type": "object", "properties": {"invoice": {"type": "string"}}},
                "annotations": {"readOnlyHint": True},
            }
            result = {"tools": [tool]}
        else:
            result = {}
        self._send(200, {"jsonrpc": "2.0", "id": body["id"], "result": result})

    def do_GET(self) -> None:
        self._send(405, None)

    def _send(self, status: int, value: Any) -> None:
        data = b"" if value is None else json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Project:
    path: Path
    home: Path
    outbox: Path
    billing_seen: list[dict[str, str]]
    hold: Path

    @property
    def settings(self) -> Path:
        return self.path / ".gemini" / "settings.json"

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]

    def environment(self, **more: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE", "CLAUDE"))}
        return {
            **keep,
            "HOME": str(self.home),
            "MAIL_TOKEN": MAIL_SECRET,
            "PAY_TOKEN": PAY_SECRET,
            "GEMINI_API_KEY": "dummy",
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "NO_BROWSER": "true",
            **more,
        }


@pytest.fixture
def billing() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Billing,), {"seen": seen}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def project(tmp_path: Path, billing: tuple[str, list[dict[str, str]]]) -> Project:
    """A git project whose Gemini settings name the mail server and the billing server; a HOME that trusts it."""
    path = tmp_path / "project"
    (path / "tools").mkdir(parents=True)
    git = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env={**os.environ, **git}, check=True, timeout=30)
    shutil.copy(MAILBOX, path / "tools" / "mailbox_server.py")
    mailbox, hold = tmp_path / "mailbox", tmp_path / "release"
    hold.touch()  # calls answer at once unless a test removes it
    url, seen = billing
    servers = {
        "mailbox": {
            "command": sys.executable,
            "args": ["mailbox_server.py"],
            "cwd": "tools",
            "env": {"MAILBOX_DIR": str(mailbox), "MAIL_API_TOKEN": "${MAIL_TOKEN}", "MAILBOX_HOLD": str(hold)},
            "timeout": 30000,
        },
        "billing": {
            "httpUrl": url,
            "headers": {"Authorization": "Bearer $PAY_TOKEN", "X-Tenant": TENANT},
            "timeout": 30000,
            "description": "invoices",
        },
    }
    (path / ".gemini").mkdir()
    (path / ".gemini" / "settings.json").write_text(json.dumps({"mcpServers": servers}, indent=2) + "\n")
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    # A user-scope server, started in every project: `init` gives it its own journal.
    notes = {"command": sys.executable, "args": [str(MAILBOX)], "env": {"MAILBOX_DIR": str(tmp_path / "notes")}}
    (home / ".gemini" / "settings.json").write_text(json.dumps({**SETTINGS, "mcpServers": {"notes": notes}}))
    # What a user does once when Gemini asks: trust the project folder.
    (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(path): "TRUST_FOLDER"}))
    return Project(path, home, mailbox / "sent.jsonl", seen, hold)


def gemini(project: Project, *args: str, env: dict[str, str] | None = None) -> str:
    """Run the Gemini CLI in the project (its process group killed if it outlives the timeout); its output."""
    return headless(
        [*nodetools.gemini(), *args], cwd=project.path, env=env or project.environment(), timeout=GEMINI_TIMEOUT
    )


def connected(listing: str) -> set[str]:
    """The servers ``gemini mcp list`` shows as Connected."""
    return {line.split(":")[0].split()[-1] for line in listing.splitlines() if line.rstrip().endswith("Connected")}


def init(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_init("--client", "gemini", "--project", str(project.path), *args, env=project.environment())
    assert done.returncode == 0, done.stderr
    return done


def snapshot(project: Project) -> dict[Path, bytes | None]:
    files = [project.settings, project.path / ".gitignore", project.home / ".gemini" / "settings.json"]
    return {path: path.read_bytes() if path.exists() else None for path in files}


@pytest.mark.timeout(240)
def test_gemini_connects_to_both_servers_before_and_after_init_and_undo_restores_every_file(project: Project) -> None:
    assert connected(gemini(project, "mcp", "list")) == {"mailbox", "billing", "notes"}
    before = snapshot(project)

    done = init(project)
    assert "; the project's journal): mailbox, billing" in done.stderr, done.stderr
    assert "wrapped (user scope, " in done.stderr, done.stderr
    assert "trust" in done.stderr, "the summary says the folder must be trusted"
    settings = json.loads(project.settings.read_text())
    mailbox, billing = settings["mcpServers"]["mailbox"], settings["mcpServers"]["billing"]
    assert mailbox["cwd"] == "tools"
    assert mailbox["timeout"] == 30000
    assert "httpUrl" not in billing
    assert "headers" not in billing
    assert billing["description"] == "invoices"
    assert "$PAY_TOKEN" not in json.dumps(billing["args"]), "no variable left in args for Gemini to expand"
    assert [hook["hooks"][0]["name"] for hook in settings["hooks"]["SessionStart"]] == ["checkpoint-brief"]

    listing = gemini(project, "mcp", "list")
    assert connected(listing) == {"mailbox", "billing", "notes", "checkpoint-session"}, listing
    notes = json.loads((project.home / ".gemini" / "settings.json").read_text())["mcpServers"]["notes"]
    assert "--upstream-cmd" in notes["args"], notes
    assert "checkpoint_mcp" in listing or "checkpoint " in listing, listing

    again = init(project)
    assert "nothing to change" in again.stderr, again.stderr
    assert again.stdout == ""

    undone = run_init("--undo", "--project", str(project.path), env=project.environment())
    assert undone.returncode == 0, undone.stderr
    assert snapshot(project) == before


@pytest.mark.timeout(240)
def test_a_repeated_send_in_a_second_gemini_session_is_refused_and_the_brief_reaches_the_model(
    project: Project,
) -> None:
    init(project)

    first = ScriptedGemini([ToolCall(SEND, MAIL)], watch=str(project.path.parent))
    session(project, first)
    assert SEND in first.declared(), first.declared()
    assert len(project.sent()) == 1, first.function_responses()
    journaled = subprocess.run(
        [sys.executable, "-m", "checkpoint_mcp", "journal", "ls", "--journal", str(journal(project))],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "mailbox" in journaled.stdout, journaled.stdout

    # Secrets reached the servers through the entries' env, never a command line.
    assert first.processes, "no server process was running during the session"
    for process in first.processes:
        assert MAIL_SECRET.encode() not in process.cmdline
        assert PAY_SECRET.encode() not in process.cmdline
    servers = [p for p in first.processes if b"mailbox_server.py" in p.cmdline and b"checkpoint" not in p.cmdline]
    assert any(f"MAIL_API_TOKEN={MAIL_SECRET}\0".encode() in p.environ for p in servers), "the mail secret"
    assert project.billing_seen[-1]["authorization"] == f"Bearer {PAY_SECRET}"
    assert project.billing_seen[-1]["x-tenant"] == TENANT

    again = ScriptedGemini([ToolCall(SEND, MAIL)])
    session(project, again)
    assert len(project.sent()) == 1, project.sent()
    brief = hook_context(again)
    assert "Side effects (journal)" in brief, "the brief never reached the model"
    assert "send_email" in brief, brief
    refusal = again.function_responses()[-1]
    assert "send_email" in refusal, refusal
    assert "already ran" in refusal, refusal


def hook_context(model: ScriptedGemini) -> str:
    """What the SessionStart hook added to the prompt of the session's first request (Gemini wraps it in
    ``<hook_context>``)."""
    prompt = "".join(part.get("text", "") for c in model.requests[0]["contents"] for part in c["parts"])
    return prompt[prompt.find("<hook_context>") : prompt.find("</hook_context>")]


def journal(project: Project) -> Path:
    return project.path / ".checkpoint" / "journal.db"


def session(project: Project, model: ScriptedGemini) -> str:
    """One whole headless Gemini session driven by ``model``, every tool allowed."""
    with serving(model) as url:
        return gemini(
            project,
            "-p",
            "Send Bob his invoice.",
            "--approval-mode",
            "yolo",
            "--output-format",
            "json",
            env=project.environment(GOOGLE_GEMINI_BASE_URL=url),
        )


@pytest.mark.timeout(240)
def test_gemini_killed_mid_call_then_a_new_session_sends_one_email_and_the_brief_says_it_is_in_doubt(
    project: Project,
) -> None:
    init(project)
    project.hold.unlink()  # the mail goes out, then the answer waits
    model = ScriptedGemini([ToolCall(SEND, MAIL)])
    with serving(model) as url:
        child = subprocess.Popen(
            [*nodetools.gemini(), "-p", "Send Bob his invoice.", "--approval-mode", "yolo"],
            cwd=project.path,
            env=project.environment(GOOGLE_GEMINI_BASE_URL=url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + GEMINI_TIMEOUT
        while not project.sent() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(child.pid, signal.SIGKILL)  # Gemini, its proxies and the mail server: a crash
        child.wait(timeout=30)
    assert project.sent(), "the mail was never sent"
    project.hold.touch()

    after = ScriptedGemini([ToolCall(SEND, MAIL)])
    session(project, after)

    assert len(project.sent()) == 1, project.sent()
    brief = hook_context(after)
    assert "send_email" in brief, brief
    assert "doubt" in brief, brief
    answer = after.function_responses()[-1]
    assert "in doubt" in answer, answer
    assert "sent 'Your invoice'" not in answer, answer
