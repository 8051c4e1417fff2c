"""Agent sessions against a project set up by a plain `checkpoint init`, driven as Claude Code drives them.

A ``Project`` is a temporary folder whose ``.mcp.json`` lists real servers; ``checkpoint init`` wraps them. A
``session`` is what Claude Code does when it starts: it runs the project's SessionStart hook (``checkpoint brief
--hook``, with the session's source on stdin), starts every wrapped server entry as its own process set (through
the official MCP SDK client over stdio: ``ClientSession``), initializes each and lists its tools; the agent then
calls tools; the session ends with the processes. A ``/clear`` runs the hook again while the processes live on.

A ``Tally`` counts both ways the protection can fail: a legitimate call refused (a false refusal) and a side
effect that happened more often than the agent meant (a double effect). Each test asserts both are zero.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from .entries import launch_argv, run_init

SESSION_SERVER = "checkpoint-session"


@dataclass(frozen=True)
class Outcome:
    """What one tools/call got: a result (its text, and whether the tool reported an error), or a JSON-RPC
    error (its code and message: a refusal, or the client's own timeout)."""

    text: str
    is_error: bool = False
    code: int | None = None

    @property
    def refused(self) -> bool:
        """The call was answered with a JSON-RPC error: it did not run (or the client gave up on it)."""
        return self.code is not None


@dataclass
class Project:
    """A temporary project: its folder, and what `init` printed."""

    path: Path
    summary: str = ""

    @property
    def journal(self) -> str:
        return str(self.path / ".checkpoint" / "journal.db")

    def policy(self, server: str) -> str:
        return (self.path / ".checkpoint" / "policies" / f"{server}.toml").read_text()

    def wrapped(self) -> dict[str, Any]:
        servers: dict[str, Any] = json.loads((self.path / ".mcp.json").read_text())["mcpServers"]
        return servers


def plain_init(folder: Path, servers: Mapping[str, Any]) -> Project:
    """``folder`` as a project whose ``.mcp.json`` lists ``servers``, after a plain `checkpoint init` (every
    server asked for its tools within a minute: the machine may be busy)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": dict(servers)}, indent=2))
    done = run_init("--project", str(folder), "--list-timeout", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", "without --diff, init prints no diff"
    return Project(folder, done.stderr)


class Session:
    """One agent session: a client session per wrapped server, all started together."""

    def __init__(self, project: Project, clients: Mapping[str, ClientSession]) -> None:
        self.project = project
        self._clients = clients

    async def call(
        self, server: str, tool: str, arguments: Mapping[str, Any], *, timeout: float | None = None
    ) -> Outcome:
        """Call ``tool`` of ``server`` as the agent does; ``timeout`` is the client's (``read_timeout_seconds``),
        after which the SDK gives up on the call and tells the server (``notifications/cancelled``)."""
        try:
            with anyio.fail_after(120):
                result = await self._clients[server].call_tool(tool, dict(arguments), read_timeout_seconds=timeout)
        except MCPError as exc:
            return Outcome(exc.error.message, code=exc.error.code)
        text = "\n".join(getattr(block, "text", "") for block in getattr(result, "content", []))
        return Outcome(text, is_error=bool(getattr(result, "is_error", False)))

    def clear(self) -> None:
        """``/clear``: the conversation is gone, the server processes live on; the SessionStart hook runs."""
        run_hook(self.project, "clear")


@asynccontextmanager
async def session(project: Project, source: str = "startup") -> AsyncIterator[Session]:
    """A new session of the project, as Claude Code starts one (the hook, then every server, listed)."""
    run_hook(project, source)
    environ = {**os.environ, "CLAUDE_PROJECT_DIR": str(project.path)}
    async with AsyncExitStack() as stack:
        clients: dict[str, ClientSession] = {}
        for name, entry in project.wrapped().items():
            if name == SESSION_SERVER:
                continue
            argv, env = launch_argv(entry, environ)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(project.path))
            read, write = await stack.enter_async_context(stdio_client(params))
            client = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(90):
                await client.initialize()
                await client.list_tools()
            clients[name] = client
        yield Session(project, clients)


def run_hook(project: Project, source: str) -> None:
    """Every SessionStart hook of the project's ``.claude/settings.json``, as Claude Code runs them."""
    settings = json.loads((project.path / ".claude" / "settings.json").read_text())
    payload = {"hook_event_name": "SessionStart", "source": source, "cwd": str(project.path), "session_id": "test"}
    for group in settings["hooks"]["SessionStart"]:
        for hook in group["hooks"]:
            done = subprocess.run(
                ["/bin/sh", "-c", hook["command"]],
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                cwd=project.path,
                env={**os.environ, "CLAUDE_PROJECT_DIR": str(project.path)},
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr


@dataclass
class Tally:
    """Both sides of the protection, counted: legitimate calls refused, and effects that happened too often."""

    false_refusals: list[str] = field(default_factory=list)
    double_effects: list[str] = field(default_factory=list)
    missing_effects: list[str] = field(default_factory=list)

    def meant(self, what: str, outcome: Outcome) -> Outcome:
        """A call the agent meant to run (a second click, a checkout back, a fresh read): it must not be refused."""
        if outcome.refused:
            self.false_refusals.append(f"{what}: {outcome.text}")
        return outcome

    def effects(self, what: str, happened: int, meant: int) -> None:
        """A side effect the agent meant ``meant`` times happened ``happened`` times."""
        if happened > meant:
            self.double_effects.append(f"{what}: {happened} times, meant {meant}")
        elif happened < meant:
            self.missing_effects.append(f"{what}: {happened} times, meant {meant}")

    def assert_clean(self) -> None:
        """No false refusal, no double effect, and every meant effect happened."""
        found = {
            "false refusals": self.false_refusals,
            "double effects": self.double_effects,
            "missing effects": self.missing_effects,
        }
        assert not any(found.values()), {what: items for what, items in found.items() if items}
