"""Where each MCP client keeps its servers, and the shape of one server entry.

The clients, as they document their files:

- **Claude Code**, project scope: ``<project>/.mcp.json`` with ``mcpServers``; its hooks in
  ``<project>/.claude/settings.json``. It expands ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``,
  ``env``, ``url`` and ``headers``.
- **Cursor**, project scope: ``<project>/.cursor/mcp.json`` with ``mcpServers`` (``${env:VAR}`` and friends).
- **VS Code**, workspace scope: ``<project>/.vscode/mcp.json`` whose top-level key is ``servers`` (and
  ``inputs``, kept as they are); ``${env:VAR}``, ``${input:ID}``, ``${workspaceFolder}``; its agent hooks (Preview)
  in ``<project>/.github/hooks/*.json``.
- **Codex CLI**: ``[mcp_servers.NAME]`` in ``<project>/.codex/config.toml`` and ``~/.codex/config.toml``, TOML
  (``init.codex``).
- **Claude Desktop**: one file per user, ``claude_desktop_config.json`` in ``~/Library/Application
  Support/Claude`` (macOS), ``%APPDATA%\\Claude`` (Windows), ``$XDG_CONFIG_HOME/Claude`` (Linux builds), with
  ``mcpServers``.
- **Gemini CLI**, project scope: ``<project>/.gemini/settings.json`` with ``mcpServers`` and, in the same file,
  its hooks; its entries name their transport by key (``httpUrl``, ``url``, ``command``): ``gemini`` reads them.

- **OpenCode**: ``opencode.json`` (or ``opencode.jsonc``) in the project and ``~/.config/opencode/opencode.json``,
  servers under ``mcp`` in a shape of its own (``formats.OPENCODE``); the brief by a generated plugin.
- **GitHub Copilot CLI**: ``<project>/.github/mcp.json`` and ``.mcp.json`` (read only in a folder the user trusts),
  ``~/.copilot/mcp-config.json`` (``$COPILOT_HOME``); the brief by a hook file of its own.
- **Cline** (CLI): one file per user, ``~/.cline/data/settings/cline_mcp_settings.json`` (``$CLINE_DIR``); the brief
  by a generated plugin in the project.
- **Qwen Code** (a Gemini CLI fork): ``<project>/.qwen/settings.json``, ``.mcp.json`` and ``~/.qwen/settings.json``,
  Gemini's entry shape and hooks.

``CLIENTS`` is the one table of them: each client is one entry of data (where its files live per scope, which
entry format, how a session start gets the brief and what its hook prints, its quirks); the behaviour each names
lives in ``formats`` (entry shapes) and ``briefs`` (hooks and plugins). Adding a client is an entry and its tests.

A server entry is either *stdio* (``command``, ``args``, ``env``) or *HTTP* (``url``, ``headers``; ``type``
``http``, ``sse`` or ``streamable-http``, or no ``type`` at all). Anything else is refused by name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.platforms.host import HOST

CLAUDE_CODE: Final = "claude-code"
CURSOR: Final = "cursor"
VSCODE: Final = "vscode"
CLAUDE_DESKTOP: Final = "claude-desktop"
GEMINI: Final = "gemini"
CODEX: Final = "codex"
OPENCODE: Final = "opencode"
COPILOT: Final = "copilot"
CLINE: Final = "cline"
QWEN: Final = "qwen"

PROJECT: Final = "project"
USER: Final = "user"

STDIO_TYPES: Final = frozenset({"stdio"})
HTTP_TYPES: Final = frozenset({"http", "sse", "streamable-http", "streamableHttp"})


@dataclass(frozen=True)
class UserFile:
    """Where a client keeps its user-wide file: ``$<env>/<under>/<name>`` when the variable is set, else
    ``~/<default>/<name>``."""

    default: str
    name: str
    env: str | None = None
    under: str = ""

    def path(self, environ: Mapping[str, str]) -> str:
        """The file's absolute path."""
        if self.env and environ.get(self.env):
            return os.path.join(environ[self.env], self.under, self.name)
        home = environ.get("HOME") or os.path.expanduser("~")
        return os.path.join(home, self.default, self.name)


@dataclass(frozen=True)
class Client:
    """One MCP client, one entry of the table: its files per scope, the shape of its entries, how its sessions get
    the brief, and its quirks."""

    name: str
    servers_key: str
    hook: bool
    """Whether the client runs SessionStart hooks (Claude Code): then `init` adds `checkpoint brief --hook`."""
    finds_journals: bool
    """Whether a bare `checkpoint session` it starts finds the project and its journals by itself (Claude Code
    sets ``CLAUDE_PROJECT_DIR``, and the session reads the journals from the project's ``.mcp.json``)."""
    label: str = ""
    """Its name for people."""
    project_files: tuple[str, ...] = ()
    """The files of its project-scope servers, relative to the project: all are read; the first gets the session
    server (none: it has no project scope)."""
    user_file: UserFile | None = None
    """Its user-wide file of servers, started in every project (None: it has none that `init` wraps)."""
    entry_format: str = "standard"
    """The shape of a server entry: a key of ``formats.FORMATS``."""
    brief: str | None = None
    """How a session start gets the brief: a kind of ``briefs`` (None: it has no hook `init` can use)."""
    hook_output: str = "claude"
    """What its hook must print (``checkpoint brief --hook --hook-format``): ``claude`` (``hookSpecificOutput``),
    ``copilot`` (``additionalContext``), ``cursor`` (``additional_context``), or ``text`` (a plugin's)."""
    session_keys: tuple[tuple[str, object], ...] = ()
    """Keys the session server's entry gets beside its command (Cline's ``timeout``)."""
    start_keys: tuple[tuple[str, object], ...] = ()
    """Keys a wrapped entry gets where it has none of its own: the time the client gives a server to start, where
    its default is too short for the proxy's start (the journal's open, then the server's own start)."""
    notes: tuple[str, ...] = ()
    """What the user must still do for the client to run what `init` wrote; ``{project}`` and ``{servers}`` are
    filled in."""
    planner: str = "json"
    """Which run of `init` writes its files: ``json`` (``plan``), ``codex`` (``codex``), ``files`` (the table's
    own, ``client_files``)."""
    sessions: str = ""
    """What the user should know of how its sessions are told apart, where it differs from a session start hook
    marking each (docs/sessions.md); printed by `init`."""

    def scopes(self) -> tuple[str, ...]:
        """The scopes it has files for."""
        return tuple(s for s, has in ((PROJECT, bool(self.project_files)), (USER, self.user_file)) if has)


CLINE_SESSION_TIMEOUT: Final = 30
"""Seconds Cline gives the session server to connect (Cline 3.0.65 gives an entry without ``timeout`` 3 s, which
the session server missed on a loaded machine)."""
CLINE_WRAPPED_TIMEOUT: Final = 60
"""Seconds Cline gives a wrapped server that had no ``timeout``: an entry's ``timeout`` is both its wait to connect
(3 s without one, which a wrapped server missed on a loaded machine) and each request's (60 s without one), so
Cline's own request default keeps every request's wait as it was."""
OPENCODE_SESSION_TIMEOUT_MS: Final = 30_000
"""Milliseconds OpenCode waits for the session server's tools (its default, 5 s, is tight on a loaded machine);
a wrapped server without a ``timeout`` of its own gets the same (it only bounds the listing of tools)."""
QWEN_APPROVE_NOTE: Final = (
    "Qwen Code starts a project's server only once you approve it, and a rewritten entry is pending again: run "
    "`qwen mcp approve <name>` in {project} for each of {servers} (or approve them when qwen asks)"
)
COPILOT_TRUST_NOTE: Final = (
    "GitHub Copilot CLI reads a project's .github/mcp.json, .mcp.json and hooks only in a folder you trust: trust "
    "{project} when copilot asks (it keeps the answer in trustedFolders of ~/.copilot/config.json)"
)

DESKTOP_SESSIONS: Final = (
    "Claude Desktop runs no hooks and shares its servers with every chat, so a chat's start cannot be told from the "
    "last one's: a repeat of a protected call within one run of Claude Desktop is answered once with what ran (when, "
    "its result), and runs when sent again; after a restart of Claude Desktop it is caught (docs/sessions.md)"
)
VSCODE_SESSIONS: Final = (
    "VS Code runs the SessionStart agent hook (Preview; your organization may have turned hooks off) at the first "
    "prompt of each chat: it brings the brief and marks the window's session; VS Code keeps its servers across "
    "chats, so a new chat makes the calls of every chat before it caught again (docs/sessions.md)"
)

CLIENTS: Final[dict[str, Client]] = {
    CLAUDE_CODE: Client(
        CLAUDE_CODE,
        "mcpServers",
        hook=True,
        finds_journals=True,
        label="Claude Code",
        project_files=(".mcp.json",),
        brief="claude-settings",
    ),
    CURSOR: Client(
        CURSOR,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="Cursor",
        project_files=(os.path.join(".cursor", "mcp.json"),),
        brief="cursor-hooks",
        hook_output="cursor",
    ),
    VSCODE: Client(
        VSCODE,
        "servers",
        hook=False,
        finds_journals=False,
        label="VS Code",
        project_files=(os.path.join(".vscode", "mcp.json"),),
        brief="vscode-hooks",
        sessions=VSCODE_SESSIONS,
    ),
    CLAUDE_DESKTOP: Client(
        CLAUDE_DESKTOP,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="Claude Desktop",
        sessions=DESKTOP_SESSIONS,
    ),
    # Gemini's hook goes in the file of its servers (``gemini``); its session server is told the journals.
    GEMINI: Client(
        GEMINI,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="Gemini CLI",
        project_files=(os.path.join(".gemini", "settings.json"),),
        user_file=UserFile(".gemini", "settings.json", "GEMINI_CLI_HOME", ".gemini"),
        entry_format="gemini",
        brief="gemini-settings",
    ),
    # Codex's files are TOML, with servers under ``mcp_servers``: ``init.codex`` reads and writes them.
    CODEX: Client(
        CODEX,
        "mcp_servers",
        hook=True,
        finds_journals=False,
        label="Codex CLI",
        project_files=(os.path.join(".codex", "config.toml"),),
        user_file=UserFile(".codex", "config.toml", "CODEX_HOME"),
        brief="codex-toml",
        planner="codex",
    ),
    OPENCODE: Client(
        OPENCODE,
        "mcp",
        hook=False,
        finds_journals=False,
        label="OpenCode",
        project_files=("opencode.json", "opencode.jsonc"),
        user_file=UserFile(os.path.join(".config", "opencode"), "opencode.json", "XDG_CONFIG_HOME", "opencode"),
        entry_format="opencode",
        brief="opencode-plugin",
        hook_output="text",
        session_keys=(("enabled", True), ("timeout", OPENCODE_SESSION_TIMEOUT_MS)),
        start_keys=(("timeout", OPENCODE_SESSION_TIMEOUT_MS),),
        planner="files",
    ),
    COPILOT: Client(
        COPILOT,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="GitHub Copilot CLI",
        project_files=(os.path.join(".github", "mcp.json"), ".mcp.json"),
        user_file=UserFile(".copilot", "mcp-config.json", "COPILOT_HOME"),
        entry_format="copilot",
        brief="copilot-hooks",
        hook_output="copilot",
        session_keys=(("tools", ["*"]),),
        notes=(COPILOT_TRUST_NOTE,),
        planner="files",
    ),
    CLINE: Client(
        CLINE,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="Cline",
        user_file=UserFile(
            os.path.join(".cline", "data", "settings"),
            "cline_mcp_settings.json",
            "CLINE_DIR",
            os.path.join("data", "settings"),
        ),
        brief="cline-plugin",
        hook_output="text",
        session_keys=(("timeout", CLINE_SESSION_TIMEOUT),),
        start_keys=(("timeout", CLINE_WRAPPED_TIMEOUT),),
        planner="files",
    ),
    QWEN: Client(
        QWEN,
        "mcpServers",
        hook=False,
        finds_journals=False,
        label="Qwen Code",
        project_files=(os.path.join(".qwen", "settings.json"), ".mcp.json"),
        user_file=UserFile(".qwen", "settings.json"),
        entry_format="gemini",
        brief="qwen-settings",
        notes=(QWEN_APPROVE_NOTE,),
        planner="files",
    ),
}


def config_path(client: Client, project: str, environ: Mapping[str, str], platform: str = HOST.platform) -> str:
    """The absolute path of the file where ``client`` keeps its servers for ``project`` (the first of its project
    files; Claude Desktop's per-user file)."""
    if client.project_files:
        return os.path.join(project, client.project_files[0])
    return desktop_config_path(environ, platform)


def files_of(client: Client, project: str, environ: Mapping[str, str], platform: str = HOST.platform) -> list[str]:
    """Every file where ``client`` may keep servers for ``project``: its project files, then its user file (Claude
    Code's ``~/.claude.json``, Claude Desktop's per-user file)."""
    paths = [os.path.join(project, name) for name in client.project_files]
    if client.user_file is not None:
        paths.append(client.user_file.path(environ))
    if client.name == CLAUDE_CODE:
        paths.append(os.path.join(environ.get("CLAUDE_CONFIG_DIR") or environ.get("HOME") or "~", ".claude.json"))
    if client.name == CLAUDE_DESKTOP:
        paths.append(desktop_config_path(environ, platform))
    return paths


def configured(project: str, environ: Mapping[str, str], platform: str = HOST.platform) -> list[tuple[Client, str]]:
    """The clients that have a file of their own for ``project`` (in it, or in the home folder), each with the
    first such file."""
    found = []
    for client in CLIENTS.values():
        # A file a client shares with another (Copilot's and Qwen's ``.mcp.json`` is Claude Code's) names the other.
        shared = {os.path.join(project, name) for name in client.project_files[1:]}
        paths = [path for path in files_of(client, project, environ, platform) if path not in shared]
        existing = [path for path in paths if os.path.isfile(path)]
        if existing:
            found.append((client, existing[0]))
    return found


def desktop_config_path(environ: Mapping[str, str], platform: str = HOST.platform) -> str:
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
