"""Claude Code's three scopes of servers, and `init` for the two that are not in the project's ``.mcp.json``.

Claude Code starts, for a project, the servers of three scopes (``--scope``, every one by default):

- **project**: ``<project>/.mcp.json`` (``plan`` wraps these, as for every client);
- **local** (what ``claude mcp add`` makes by default): ``~/.claude.json`` → ``projects["<project>"].mcpServers``,
  wrapped with the project's journal, like the project's;
- **user** (``claude mcp add -s user``): ``~/.claude.json`` → ``mcpServers``, started in every project, so each
  gets its own journal under the user's data folder (``claude_json.user_journal``), and the SessionStart hook
  goes in ``~/.claude/settings.json`` as well, the same command and matcher as the project's.

The session server stays a project's (in ``.mcp.json``): it needs a project, and the user-scope hook's brief reads
the project Claude Code is in from ``CLAUDE_PROJECT_DIR``. A server of a scope not asked for is named in the
summary as left out.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init import claude_json, clients, wrap
from checkpoint_mcp.init.claude_json import Edit
from checkpoint_mcp.init.files import Change, Loaded, load_json, render_json

LOCAL: Final = "local"
PROJECT: Final = "project"
USER: Final = "user"
SCOPES: Final = (LOCAL, PROJECT, USER)


def parse(values: Sequence[str]) -> tuple[str, ...]:
    """The scopes asked for (each once, in Claude Code's order); every scope when none is.

    Raises:
        InitError: a value is not a scope.
    """
    unknown = [value for value in values if value not in SCOPES]
    if unknown:
        raise InitError(f"unknown --scope {', '.join(map(repr, unknown))} (the scopes: {', '.join(SCOPES)})")
    return tuple(scope for scope in SCOPES if scope in values or not values)


def left_out(scope: str) -> str:
    """Why a server of ``scope`` was not wrapped when ``--scope`` did not name it."""
    return f"{scope} scope; not in --scope"


@dataclass(frozen=True)
class Wrapped:
    """One server `init` wrapped: its scope, its name, the journal it writes to, and the file it is in."""

    scope: str
    name: str
    journal: str
    file: str


@dataclass
class Found:
    """``~/.claude.json`` as read, and a copy of it whose server tables `init` changes."""

    loaded: Loaded
    document: Any
    local: dict[str, Any]
    user: dict[str, Any]
    project: str

    def names(self) -> dict[str, Any]:
        """Every server of both scopes (for ``--only`` and ``--skip``)."""
        return {**self.user, **self.local}


def read(project: str, environ: Mapping[str, str]) -> Found:
    """Read ``~/.claude.json`` (a missing file has no servers).

    Raises:
        ClientConfigError: the file cannot be read, is not JSON, or a servers table is not an object.
    """
    loaded = load_json(claude_json.path(environ))
    document = copy.deepcopy(loaded.value)
    if not isinstance(document, dict):
        raise ClientConfigError(loaded.path, "the file is not a JSON object")
    local = claude_json.servers_at(document, claude_json.local_pointer(project), loaded.path)
    user = claude_json.servers_at(document, claude_json.USER_POINTER, loaded.path)
    return Found(loaded, document, local, user, project)


def read_for(project: str, environ: Mapping[str, str], asked: Sequence[str]) -> Found | None:
    """``read``, when a scope of ``~/.claude.json`` is asked for; else only to name its servers as left out
    (None when it cannot be read: nothing of it is needed).

    Raises:
        ClientConfigError: a scope of the file is asked for, and it cannot be read.
    """
    try:
        return read(project, environ)
    except ClientConfigError:
        if LOCAL in asked or USER in asked:
            raise
        return None


PolicyOf = Callable[
    [str, str, Mapping[str, Any], "clients.StdioEntry | clients.HttpEntry", dict[str, str], wrap.Wrapping],
    wrap.Wrapping,
]
"""(server name, entry, its shape, its environment, its wrapping) -> the wrapping with the server's own policy."""


@dataclass(frozen=True)
class Asked:
    """What `init` was asked for, as the runs that edit a client's files need it (this module's, Codex's, the
    table's own: ``client_files``)."""

    project: str
    scopes: tuple[str, ...]
    only: tuple[str, ...]
    skip: tuple[str, ...]
    wrapping: wrap.Wrapping
    """The project's: its (and local-scope) servers write to the project's journal."""
    environ: Mapping[str, str]
    policy_of: PolicyOf | None = None
    """Gives a server its own policy (the project's policies folder, as for `.mcp.json`'s servers)."""


def plan(found: Found, asked: Asked, left_alone: list[tuple[str, str]], wrapped: list[Wrapped]) -> list[Change]:
    """The changes to ``~/.claude.json`` and ``~/.claude/settings.json``; appends to ``left_alone`` (server, why)
    and ``wrapped``.

    Raises:
        ClientConfigError: an entry is of a shape `init` does not know, or the user settings cannot be read.
    """
    path = found.loaded.path
    edits: list[Edit] = []
    user_runs_checkpoint = False
    tables = (
        (LOCAL, claude_json.local_pointer(found.project), found.local),
        (USER, claude_json.USER_POINTER, found.user),
    )
    for scope, pointer, table in tables:
        for name in list(table):
            entry = table[name]
            if scope not in asked.scopes:
                left_alone.append((name, left_out(scope)))
            elif name in asked.skip or (asked.only and name not in asked.only):
                left_alone.append((name, "skipped"))
            elif isinstance(entry, dict) and wrap.runs_checkpoint(entry):
                left_alone.append((name, "already runs checkpoint"))
                user_runs_checkpoint |= scope == USER
            else:
                shape = clients.classify(name, entry, path)
                env = clients.check_env(name, entry, path)
                wrapping = asked.wrapping
                if scope == USER:
                    journal = claude_json.user_journal(name, asked.environ)
                    wrapping = wrap.Wrapping(wrapping.launcher, journal, wrapping.policy)
                    user_runs_checkpoint = True
                if asked.policy_of is not None:
                    wrapping = asked.policy_of(scope, name, entry, shape, env, wrapping)
                table[name] = wrap.wrap(name, entry, shape, wrapping)
                edits.append(Edit((*pointer, name), entry, table[name]))
                wrapped.append(Wrapped(scope, name, wrapping.journal, path))
    changes = []
    if edits:
        after = claude_json.render(found.document, found.loaded.raw)
        changes.append(Change(path, found.loaded.raw, after, tuple(edits)))
    if user_runs_checkpoint and USER in asked.scopes:
        hook = _user_hook(asked)
        if hook is not None:
            changes.append(hook)
    return changes


def _user_hook(asked: Asked) -> Change | None:
    """``~/.claude/settings.json`` with the SessionStart hook added (None when it has it).

    Raises:
        ClientConfigError: the file cannot be read, or its hooks are not of the shape Claude Code reads.
    """
    path = claude_json.user_settings_path(asked.environ)
    loaded = load_json(path)
    if not isinstance(loaded.value, dict):
        raise ClientConfigError(path, "the file is not a JSON object")
    if wrap.has_brief_hook(loaded.value):
        return None
    settings = copy.deepcopy(loaded.value)
    problem = wrap.add_brief_hook(settings, asked.wrapping.launcher.shell("brief", "--hook"))
    if problem is not None:
        raise ClientConfigError(path, problem)
    return Change(path, loaded.raw, render_json(settings, loaded.raw))


def make_journal_folders(wrapped: Sequence[Wrapped]) -> None:
    """Create the folder of the user-scope servers' journals, owner-only, where missing (the journal makes only
    its own files).

    Raises:
        InitError: it cannot be created.
    """
    for folder in sorted({os.path.dirname(w.journal) for w in wrapped if w.scope == USER}):
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise InitError(f"the journal folder {folder} cannot be created ({exc.strerror})") from exc
