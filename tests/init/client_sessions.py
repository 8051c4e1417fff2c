"""Clients as processes, after a plain `checkpoint init`: each a real process (``clients/simulated_client.py``) whose
hooks run through ``/bin/sh -c`` as its children and whose servers are its children, as FACTS.md describes the
clients; what each one runs, and when, is read from the files `init` wrote for it:

* **Claude Code**: ``.mcp.json``'s servers; the SessionStart hooks of ``.claude/settings.json`` whose matcher
  takes the source (``startup`` at a start, ``clear`` at a ``/clear``), with Claude Code's input;
* **Cursor**: ``.cursor/mcp.json``'s servers; ``.cursor/hooks.json``'s ``sessionStart`` commands;
* **VS Code**: ``.vscode/mcp.json``'s servers, started once and kept across chats; the ``SessionStart`` commands of
  ``.github/hooks/*.json`` at the first prompt of each chat (input ``sessionId``, ``source: "new"``);
* **Claude Desktop**: ``claude_desktop_config.json``'s servers, started once and shared by every chat; no hook.

Each call's outcome is an ``agent_sessions.Outcome``, so a ``Tally`` counts both sides.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .agent_sessions import SESSION_SERVER, Outcome
from .entries import launch_argv

SIMULATED = Path(__file__).resolve().parent.parent / "clients" / "simulated_client.py"
ANSWER_SECONDS = 180.0
BRIEF = "## Side effects (journal)"


class Client:
    """One client process."""

    def __init__(self, name: str, env: Mapping[str, str], cwd: Path) -> None:
        self.name = name
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, str(SIMULATED)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, command: dict[str, Any]) -> dict[str, Any]:
        """One command and its answer."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._lines.get(timeout=ANSWER_SECONDS)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no answer to {command['op']} within {ANSWER_SECONDS}s") from None
        if line is None:
            raise AssertionError(f"{self.name}: the client process exited")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def hook(self, command: str, payload: Mapping[str, Any]) -> str:
        """Run one hook command as the client runs it; what it printed (it must succeed)."""
        done = self.send({"op": "hook", "command": command, "input": dict(payload), "cwd": str(self.cwd)})
        assert done["code"] == 0, f"{self.name}: the hook failed: {done['stderr']}"
        return str(done["stdout"])

    def start(self, servers: Mapping[str, Mapping[str, Any]]) -> None:
        """Start the servers (each must start, and list its tools)."""
        done = self.send({"op": "start", "servers": dict(servers), "cwd": str(self.cwd)})
        failed = {name: s["error"] for name, s in done["servers"].items() if "error" in s}
        assert not failed, f"{self.name}: servers did not start: {failed}"

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        done = self.send({"op": "call", "server": server, "tool": tool, "arguments": dict(arguments)})
        if "code" in done:
            return Outcome(done["message"], code=done["code"])
        return Outcome(done["text"], is_error=done["isError"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"op": "exit"})
                self.proc.wait(timeout=60)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@contextmanager
def running(name: str, env: Mapping[str, str], cwd: Path) -> Iterator[Client]:
    client = Client(name, env, cwd)
    try:
        yield client
    finally:
        client.close()


def stdio_servers(servers: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The stdio servers of a client's file as it starts them (the session server left out: no test here calls it),
    each ``{"command", "args", "env"}``."""
    started: dict[str, dict[str, Any]] = {}
    for name, entry in servers.items():
        if name == SESSION_SERVER or not isinstance(entry, dict) or "command" not in entry:
            continue
        argv, env = launch_argv(entry, environ)
        started[name] = {
            "command": argv[0],
            "args": argv[1:],
            "env": {k: v for k, v in env.items() if k in entry.get("env", {})},
        }
    return started


# ---- Claude Code ---------------------------------------------------------------------------------------------


class ClaudeCode:
    """One Claude Code session: a ``claude`` process in the project."""

    def __init__(self, client: Client, project: Path) -> None:
        self.client = client
        self.project = project
        self.session_id = str(uuid.uuid4())

    @classmethod
    @contextmanager
    def session(cls, name: str, project: Path, env: Mapping[str, str]) -> Iterator[ClaudeCode]:
        """A new session: the SessionStart hook (``startup``), then every server of ``.mcp.json``."""
        environ = {**env, "CLAUDE_PROJECT_DIR": str(project)}
        with running(name, environ, project) as client:
            claude = cls(client, project)
            claude.start_session("startup")
            servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
            client.start(stdio_servers(servers, environ))
            yield claude

    def start_session(self, source: str) -> str:
        """Run the SessionStart hooks whose matcher takes ``source``; the brief they printed."""
        settings = json.loads((self.project / ".claude" / "settings.json").read_text())
        if source == "clear":
            self.session_id = str(uuid.uuid4())
        payload = {
            "hook_event_name": "SessionStart",
            "source": source,
            "session_id": self.session_id,
            "cwd": str(self.project),
        }
        printed = ""
        for group in settings["hooks"]["SessionStart"]:
            if re.fullmatch(group.get("matcher", ".*") or ".*", source):
                for hook in group["hooks"]:
                    printed += self.client.hook(hook["command"], payload)
        return printed

    def clear(self) -> str:
        """``/clear``: the conversation is gone, the servers live on; the SessionStart hook runs (``clear``)."""
        return self.start_session("clear")

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        return self.client.call(server, tool, arguments)


# ---- Cursor ----------------------------------------------------------------------------------------------------


@contextmanager
def cursor_session(name: str, project: Path, env: Mapping[str, str]) -> Iterator[Client]:
    """A Cursor window: its ``sessionStart`` hooks, then every server of ``.cursor/mcp.json``."""
    with running(name, env, project) as client:
        hooks = json.loads((project / ".cursor" / "hooks.json").read_text())["hooks"]["sessionStart"]
        payload = {"hook_event_name": "sessionStart", "conversation_id": str(uuid.uuid4())}
        for hook in hooks:
            client.hook(hook["command"], payload)
        servers = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]
        client.start(stdio_servers(servers, env))
        yield client


# ---- VS Code -----------------------------------------------------------------------------------------------------


class VsCode:
    """One VS Code window: its servers started once and kept across chats; each chat's first prompt runs the
    ``SessionStart`` hooks of ``.github/hooks/*.json``."""

    def __init__(self, client: Client, project: Path) -> None:
        self.client = client
        self.project = project

    @classmethod
    @contextmanager
    def window(cls, name: str, project: Path, env: Mapping[str, str]) -> Iterator[VsCode]:
        with running(name, env, project) as client:
            servers = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]
            client.start(stdio_servers(servers, env))
            yield cls(client, project)

    def new_chat(self) -> str:
        """The first prompt of a new chat: every ``SessionStart`` hook runs; the context they add, joined."""
        payload = {
            "timestamp": "2026-12-06T10:00:00.000Z",
            "cwd": str(self.project),
            "sessionId": str(uuid.uuid4()),
            "hookEventName": "SessionStart",
            "source": "new",
        }
        added = []
        for path in sorted((self.project / ".github" / "hooks").glob("*.json")):
            for hook in json.loads(path.read_text()).get("hooks", {}).get("SessionStart", []):
                printed = self.client.hook(hook["command"], payload)
                added.append(json.loads(printed)["hookSpecificOutput"]["additionalContext"])
        return "\n".join(added)

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> Outcome:
        return self.client.call(server, tool, arguments)


# ---- Claude Desktop ----------------------------------------------------------------------------------------------


@contextmanager
def claude_desktop(name: str, config: Path, env: Mapping[str, str], cwd: Path) -> Iterator[Client]:
    """Claude Desktop: every server of its per-user file started once, shared by every chat; no hook."""
    with running(name, env, cwd) as client:
        servers = json.loads(config.read_text())["mcpServers"]
        client.start(stdio_servers(servers, env))
        yield client


def clean_environment(home: Path) -> dict[str, str]:
    """This test run's environment with a HOME of the test's own (no variable of the machine's XDG folders)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "CLAUDE"))}
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
    }
