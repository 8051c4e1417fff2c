"""Google's Gemini CLI: its ``settings.json`` server entries and its SessionStart hook, as `init` rewrites them.

Gemini CLI (checked against 0.61.0) keeps its servers under ``mcpServers`` in ``<project>/.gemini/settings.json``
(project) and ``~/.gemini/settings.json`` (user; a project entry wins by name), and its hooks in the same files
under ``hooks``. What `init` must know of it:

- An entry picks its transport by key: ``httpUrl`` (Streamable HTTP) beats ``url`` (SSE) beats ``command``
  (stdio). The wrapped entry runs ``checkpoint`` (stdio) and drops the keys of the transport it replaces (every
  URL key, ``headers``, ``type``); ``cwd``, ``timeout``, ``trust``, ``includeTools`` and the rest stay.
- Gemini expands ``$VAR``, ``${VAR}`` and ``${VAR:-default}`` in every string of the file when it loads it
  (args and hook commands too), so an argument holding either form moves into ``env``, as for the other clients'
  ``${VAR}`` (``wrap.shell_command``). It strips secret-looking names (``*TOKEN*``, ``*KEY*``, ``*AUTH*``) from
  the environment a server inherits, but passes what the entry's own ``env`` says: that is where a header's
  value goes (``CHECKPOINT_HEADER_<NAME>``).
- An entry Gemini authenticates itself (``oauth``, ``authProviderType``) cannot be carried over to the proxy.
- ``hooks.SessionStart`` is a list of groups ``{"matcher"?, "hooks": [{"name", "type", "command", "timeout"}]}``,
  ``timeout`` in milliseconds; no matcher runs it on every source (startup, resume, clear). A hook prints the
  same ``hookSpecificOutput.additionalContext`` as Claude Code's, and Gemini sets ``CLAUDE_PROJECT_DIR`` (as an
  alias of ``GEMINI_PROJECT_DIR``) for it: ``checkpoint brief --hook`` serves both.
- ``--scope user``: the servers of ``~/.gemini/settings.json`` run in every project, so each gets its own journal
  under the user's data folder (``claude_json.user_journal``), and the brief hook goes in that file too; the
  session server stays the project's.
- Folder trust: in a folder the user has not trusted, Gemini starts none of the project's servers (nor the
  user's stdio ones) and runs none of its hooks. `init` never marks a folder trusted; its summary says so.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.init import claude_json, clients, scopes, wrap
from checkpoint_mcp.init.files import Change, Loaded, load_json, render_json

SETTINGS: Final = os.path.join(".gemini", "settings.json")
HOME_ENV: Final = "GEMINI_CLI_HOME"
HOOK_NAME: Final = "checkpoint-brief"
HOOK_TIMEOUT_MS: Final = wrap.HOOK_TIMEOUT * 1000
URL_KEYS: Final = ("httpUrl", "url")
TRANSPORT_KEYS: Final = ("httpUrl", "url", "command", "args", "headers", "type")
NOT_CARRIED: Final = ("oauth", "authProviderType")
_VARIABLE: Final = re.compile(r"\$(?:\w|\{)")
TRUST_NOTE: Final = (
    "Gemini CLI starts a project's servers and hooks only in a folder you trust: trust {project} (Gemini asks "
    "when it starts there; `init` never marks it), then restart gemini"
)


def user_settings(environ: Mapping[str, str]) -> str:
    """The user's ``~/.gemini/settings.json`` (under ``$GEMINI_CLI_HOME`` instead of the home folder when that is
    set, as Gemini does)."""
    home = environ.get(HOME_ENV) or environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, SETTINGS)


def holds_variable(word: str) -> bool:
    """Whether Gemini expands something in ``word`` (``$VAR`` or ``${…}``) when it loads the file."""
    return _VARIABLE.search(word) is not None


def classify(name: str, entry: object, path: str) -> tuple[clients.StdioEntry | clients.HttpEntry, dict[str, Any]]:
    """Read one Gemini server entry by the transport Gemini picks for it; returns its shape and the entry as
    ``wrap.wrap`` takes it (the winning key as ``command`` or ``url``, in its place; the keys it beats dropped).

    Raises:
        ClientConfigError: the entry is of a shape `init` does not know, or Gemini authenticates it itself; the
            message names the file, the entry and the field.
    """
    if not isinstance(entry, dict):
        raise ClientConfigError(path, "the entry is not a JSON object", entry=name)
    for key in NOT_CARRIED:
        if key in entry:
            raise ClientConfigError(
                path, f"{key!r} (Gemini authenticates this server itself) cannot be carried over; --skip it", entry=name
            )
    winner = next((key for key in (*URL_KEYS, "command") if key in entry), None)
    if winner is None:
        raise ClientConfigError(path, "has none of 'httpUrl', 'url', 'command'", entry=name)
    # The keys of the transport Gemini uses stay (the winner under the name `wrap` reads); those it beats go.
    kept = {winner, "args"} if winner == "command" else {winner, "headers"}
    plain: dict[str, Any] = {}
    for key, value in entry.items():
        if key == winner:
            plain["command" if winner == "command" else "url"] = value
        elif key in kept or key not in TRANSPORT_KEYS:
            plain[key] = value
    return clients.classify(name, plain, path), plain


def add_brief_hook(settings: dict[str, Any], command: str) -> str | None:
    """Append the SessionStart hook running ``command`` to Gemini settings (no matcher: every source), keeping
    every hook there. Returns what is wrong with the settings' shape (None when the hook was added)."""
    groups = wrap.session_start_groups(settings)
    if isinstance(groups, str):
        return groups
    hook = {"name": HOOK_NAME, "type": "command", "command": command, "timeout": HOOK_TIMEOUT_MS}
    groups.append({"hooks": [hook]})
    return None


@dataclass
class UserFile:
    """``~/.gemini/settings.json`` as read, and a copy of it whose servers `init` changes."""

    loaded: Loaded
    document: dict[str, Any]
    servers: dict[str, Any]


def read_user(environ: Mapping[str, str]) -> UserFile:
    """Read the user's Gemini settings (a missing file has no servers).

    Raises:
        ClientConfigError: the file cannot be read, is not JSON, or ``mcpServers`` is not an object.
    """
    loaded = load_json(user_settings(environ))
    document = copy.deepcopy(loaded.value)
    servers = clients.servers_of(document, clients.CLIENTS[clients.GEMINI], loaded.path)
    return UserFile(loaded, document, servers)


def plan_user(
    user: UserFile, asked: scopes.Asked, left_alone: list[tuple[str, str]], wrapped: list[scopes.Wrapped]
) -> list[Change]:
    """The change to ``~/.gemini/settings.json``: each user server wrapped with its own journal, and the brief
    hook where missing; appends to ``left_alone`` (server, why) and ``wrapped``.

    Raises:
        ClientConfigError: an entry is of a shape `init` does not know, or the hooks are not of Gemini's shape.
    """
    path, servers = user.loaded.path, user.servers
    runs_checkpoint = False
    for name in list(servers):
        entry = servers[name]
        if scopes.USER not in asked.scopes:
            left_alone.append((name, scopes.left_out(scopes.USER)))
        elif name in asked.skip or (asked.only and name not in asked.only):
            left_alone.append((name, "skipped"))
        elif isinstance(entry, dict) and wrap.runs_checkpoint(entry):
            left_alone.append((name, "already runs checkpoint"))
            runs_checkpoint = True
        else:
            shape, plain = classify(name, entry, path)
            env = clients.check_env(name, plain, path)
            journal = claude_json.user_journal(name, asked.environ)
            how = wrap.Wrapping(asked.wrapping.launcher, journal, asked.wrapping.policy)
            if asked.policy_of is not None:
                how = asked.policy_of(scopes.USER, name, plain, shape, env, how)
            servers[name] = wrap.wrap(name, plain, shape, how, holds_variable=holds_variable)
            wrapped.append(scopes.Wrapped(scopes.USER, name, journal, path))
            runs_checkpoint = True
    if servers and "mcpServers" not in user.document:
        user.document["mcpServers"] = servers
    if runs_checkpoint and not wrap.has_brief_hook(user.document):
        problem = add_brief_hook(user.document, asked.wrapping.launcher.shell("brief", "--hook"))
        if problem is not None:
            raise ClientConfigError(path, problem)
    if user.document == user.loaded.value:
        return []
    return [Change(path, user.loaded.raw, render_json(user.document, user.loaded.raw))]
