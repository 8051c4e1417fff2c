"""Where each MCP client keeps its servers, and the shape of one server entry.

The clients, as they document their files:

- **Claude Code**, project scope: ``<project>/.mcp.json`` with ``mcpServers``; its hooks in
  ``<project>/.claude/settings.json``. It expands ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``,
  ``env``, ``url`` and ``headers``.
- **Cursor**, project scope: ``<project>/.cursor/mcp.json`` with ``mcpServers`` (``${env:VAR}`` and friends).
- **VS Code**, workspace scope: ``<project>/.vscode/mcp.json`` whose top-level key is ``servers`` (and
  ``inputs``, kept as they are); ``${env:VAR}``, ``${input:ID}``, ``${workspaceFolder}``.
- **Codex CLI**: ``[mcp_servers.NAME]`` in ``<project>/.codex/config.toml`` and ``~/.codex/config.toml``, TOML
  (``init.codex``).
- **Claude Desktop**: one file per user, ``claude_desktop_config.json`` in ``~/Library/Application
  Support/Claude`` (macOS), ``%APPDATA%\\Claude`` (Windows), ``$XDG_CONFIG_HOME/Claude`` (Linux builds), with
  ``mcpServers``.
- **Gemini CLI**, project scope: ``<project>/.gemini/settings.json`` with ``mcpServers`` and, in the same file,
  its hooks; its entries name their transport by key (``httpUrl``, ``url``, ``command``): ``gemini`` reads them.

A server entry is either *stdio* (``command``, ``args``, ``env``) or *HTTP* (``url``, ``headers``; ``type``
``http``, ``sse`` or ``streamable-http``, or no ``type`` at all). Anything else is refused by name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError

CLAUDE_CODE: Final = "claude-code"
CURSOR: Final = "cursor"
VSCODE: Final = "vscode"
CLAUDE_DESKTOP: Final = "claude-desktop"
GEMINI: Final = "gemini"
CODEX: Final = "codex"

STDIO_TYPES: Final = frozenset({"stdio"})
HTTP_TYPES: Final = frozenset({"http", "sse", "streamable-http", "streamableHttp"})


@dataclass(frozen=True)
class Client:
    """One MCP client: its name on the command line, and the key of its file that holds the servers."""

    name: str
    servers_key: str
    hook: bool
    """Whether the client runs SessionStart hooks (Claude Code): then `init` adds `checkpoint brief --hook`."""
    finds_journals: bool
    """Whether a bare `checkpoint session` it starts finds the project and its journals by itself (Claude Code
    sets ``CLAUDE_PROJECT_DIR``, and the session reads the journals from the project's ``.mcp.json``)."""


CLIENTS: Final[dict[str, Client]] = {
    CLAUDE_CODE: Client(CLAUDE_CODE, "mcpServers", hook=True, finds_journals=True),
    CURSOR: Client(CURSOR, "mcpServers", hook=False, finds_journals=False),
    VSCODE: Client(VSCODE, "servers", hook=False, finds_journals=False),
    CLAUDE_DESKTOP: Client(CLAUDE_DESKTOP, "mcpServers", hook=False, finds_journals=False),
    # Gemini's hook goes in the file of its servers (``gemini``); its session server is told the journals.
    GEMINI: Client(GEMINI, "mcpServers", hook=False, finds_journals=False),
    # Codex's files are TOML, with servers under ``mcp_servers``: ``init.codex`` reads and writes them.
    CODEX: Client(CODEX, "mcp_servers", hook=True, finds_journals=False),
}


def config_path(client: Client, project: str, environ: Mapping[str, str], platform: str = sys.platform) -> str:
    """The absolute path of the file where ``client`` keeps its servers for ``project``."""
    if client.name == CLAUDE_CODE:
        return os.path.join(project, ".mcp.json")
    if client.name == CURSOR:
        return os.path.join(project, ".cursor", "mcp.json")
    if client.name == VSCODE:
        return os.path.join(project, ".vscode", "mcp.json")
    if client.name == GEMINI:
        return os.path.join(project, ".gemini", "settings.json")
    if client.name == CODEX:
        return os.path.join(project, ".codex", "config.toml")
    return desktop_config_path(environ, platform)


def desktop_config_path(environ: Mapping[str, str], platform: str = sys.platform) -> str:
    """Claude Desktop's ``claude_desktop_config.json`` on this operating system."""
    home = environ.get("HOME") or os.path.expanduser("~")
    if platform == "darwin":
        folder = os.path.join(home, "Library", "Application Support", "Claude")
    elif platform == "win32":
        folder = os.path.join(environ.get("APPDATA") or os.path.join(home, "AppData", "Roaming"), "Claude")
    else:
        folder = os.path.join(environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "Claude")
    return os.path.join(folder, "claude_desktop_config.json")


def settings_path(project: str) -> str:
    """Claude Code's project settings file, where its hooks live."""
    return os.path.join(project, ".claude", "settings.json")


@dataclass(frozen=True)
class StdioEntry:
    """A server the client starts as a child: ``command`` and ``args`` as the client gives them to exec."""

    command: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class HttpEntry:
    """A server the client reaches over HTTP; ``headers`` as written (a ``${VAR}`` is still a reference)."""

    url: str
    headers: tuple[tuple[str, str], ...]


def servers_of(document: object, client: Client, path: str) -> dict[str, Any]:
    """The servers table of a client's parsed file (an empty one if the key is absent).

    Raises:
        ClientConfigError: the file is not a JSON object, or its servers key is not an object.
    """
    if not isinstance(document, dict):
        raise ClientConfigError(path, "the file is not a JSON object")
    servers = document.get(client.servers_key, {})
    if not isinstance(servers, dict):
        raise ClientConfigError(path, f"{client.servers_key!r} is not an object of servers")
    return servers


def classify(name: str, entry: object, path: str) -> StdioEntry | HttpEntry:
    """Read one server entry as stdio or HTTP, checking every field `init` rewrites.

    Raises:
        ClientConfigError: the entry is of a shape `init` does not know; the message names the file, the entry
            and the field.
    """
    if not isinstance(entry, dict):
        raise ClientConfigError(path, "the entry is not a JSON object", entry=name)
    kind = entry.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in STDIO_TYPES | HTTP_TYPES):
        raise ClientConfigError(path, f"unknown server type {kind!r} (known: stdio, http, sse)", entry=name)
    has_command, has_url = "command" in entry, "url" in entry
    if has_command == has_url:
        problem = "has both 'command' and 'url'" if has_command else "has neither 'command' nor 'url'"
        raise ClientConfigError(path, problem, entry=name)
    if has_command:
        if kind is not None and kind not in STDIO_TYPES:
            raise ClientConfigError(path, f"type {kind!r} with a 'command'", entry=name)
        return StdioEntry(_string(entry, "command", path, name), _strings(entry, "args", path, name))
    if kind is not None and kind not in HTTP_TYPES:
        raise ClientConfigError(path, f"type {kind!r} with a 'url'", entry=name)
    if "headersHelper" in entry:
        raise ClientConfigError(
            path, "'headersHelper' (a command that makes the headers) cannot be carried over; --skip it", entry=name
        )
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ClientConfigError(path, "'headers' is not an object of strings", entry=name)
    for header in headers:
        if not header or any(c in header for c in ": \t\r\n"):
            raise ClientConfigError(path, f"header name {header!r} is not a valid HTTP header name", entry=name)
        if any(c in headers[header] for c in "\r\n"):
            raise ClientConfigError(path, f"header {header!r} holds a line break", entry=name)
    return HttpEntry(_string(entry, "url", path, name), tuple(headers.items()))


def check_env(name: str, entry: Mapping[str, Any], path: str) -> dict[str, str]:
    """The entry's ``env`` (empty when absent).

    Raises:
        ClientConfigError: ``env`` is not an object of strings.
    """
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ClientConfigError(path, "'env' is not an object of strings", entry=name)
    return dict(env)


def _string(entry: Mapping[str, Any], key: str, path: str, name: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ClientConfigError(path, f"{key!r} is not a non-empty string", entry=name)
    if "\0" in value:
        raise ClientConfigError(path, f"{key!r} holds a NUL character", entry=name)
    return value


def _strings(entry: Mapping[str, Any], key: str, path: str, name: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ClientConfigError(path, f"{key!r} is not a list of strings", entry=name)
    if any("\0" in v for v in value):
        raise ClientConfigError(path, f"{key!r} holds a NUL character", entry=name)
    return tuple(value)
