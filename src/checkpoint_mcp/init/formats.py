"""The shape of one server entry, per client: how `init` reads it, rewrites it to run the proxy, and writes the
session server in the same shape.

Every format turns a client's entry into the *plain* form the rest of `init` works on (``command``, ``args``,
``env``, ``url``, ``headers``, and every other key as it was: ``wrap.wrap`` rewrites that form), and back:

- ``standard``: the ``mcpServers`` entry most clients share (Claude Code, Cursor, VS Code, Claude Desktop, Copilot
  CLI, Cline): the plain form itself. A ``${…}`` is a client variable.
- ``copilot``: GitHub Copilot CLI's, the standard entry whose stdio ``type`` is ``local`` (as ``copilot mcp add``
  writes it; ``stdio`` is read too).
- ``gemini``: Gemini CLI's and Qwen Code's, which name their transport by key (``httpUrl``, ``url``, ``command``:
  ``gemini.classify``) and expand ``$VAR`` as well as ``${VAR}`` in every string of the file.
- ``opencode``: OpenCode's ``mcp`` entries, ``{"type": "local", "command": [argv…], "environment": {…}}`` or
  ``{"type": "remote", "url", "headers"}``; OpenCode substitutes ``{env:VAR}`` and ``{file:path}`` in the whole
  file when it loads it, so an argument holding either moves into ``environment``, where it is substituted as
  before. A remote entry OpenCode authenticates itself (``oauth``) cannot be carried over.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.init import clients, gemini, wrap

Shape = clients.StdioEntry | clients.HttpEntry


@dataclass(frozen=True)
class EntryFormat:
    """One client's server entry: read into the plain form, written back, and the session server's entry."""

    name: str
    read: Callable[[str, object, str], tuple[Shape, dict[str, Any]]]
    """(server, entry, file) -> its shape and its plain form. Raises ClientConfigError for a shape `init` does not
    know, naming the file, the entry and the field."""
    view: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    """An entry as ``wrap.runs_checkpoint`` and ``wrap.is_session_server`` read it (``command`` and ``args``)."""
    write: Callable[[dict[str, Any]], dict[str, Any]]
    """A plain entry (what ``wrap.wrap`` or ``wrap.session_entry`` made) in the client's own shape."""
    holds_variable: Callable[[str], bool] = wrap.holds_client_variable


def _standard_read(name: str, entry: object, path: str) -> tuple[Shape, dict[str, Any]]:
    if not isinstance(entry, dict):
        raise ClientConfigError(path, "the entry is not a JSON object", entry=name)
    return clients.classify(name, entry, path), entry


def _same(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    return entry


def _copy(entry: dict[str, Any]) -> dict[str, Any]:
    return entry


STANDARD: Final = EntryFormat("standard", _standard_read, _same, _copy)


def _copilot_read(name: str, entry: object, path: str) -> tuple[Shape, dict[str, Any]]:
    if isinstance(entry, dict) and entry.get("type") == "local":
        plain = {**entry, "type": "stdio"}
        return clients.classify(name, plain, path), plain
    return _standard_read(name, entry, path)


def _copilot_write(plain: dict[str, Any]) -> dict[str, Any]:
    """A stdio entry as Copilot writes one: ``type`` ``local``, first."""
    return {"type": "local", **{key: value for key, value in plain.items() if key != "type"}}


COPILOT: Final = EntryFormat("copilot", _copilot_read, _same, _copilot_write)
GEMINI: Final = EntryFormat("gemini", gemini.classify, _same, _copy, gemini.holds_variable)


def _opencode_holds(word: str) -> bool:
    """Whether OpenCode substitutes something in ``word`` when it loads the file (``{env:…}``, ``{file:…}``)."""
    return "{env:" in word or "{file:" in word


def _opencode_read(name: str, entry: object, path: str) -> tuple[Shape, dict[str, Any]]:
    if not isinstance(entry, dict):
        raise ClientConfigError(path, "the entry is not a JSON object", entry=name)
    kind = entry.get("type")
    plain: dict[str, Any] = {}
    if kind == "local":
        command = entry.get("command")
        if not isinstance(command, list) or not command or not all(isinstance(w, str) for w in command):
            raise ClientConfigError(path, "'command' is not a non-empty list of strings", entry=name)
        for key, value in entry.items():
            if key == "command":
                plain["command"], plain["args"] = command[0], command[1:]
            elif key == "environment":
                plain["env"] = value
            elif key != "type":
                plain[key] = value
    elif kind == "remote":
        if entry.get("oauth") not in (None, False):
            raise ClientConfigError(
                path,
                "'oauth' (OpenCode authenticates this server itself) cannot be carried over; --skip it",
                entry=name,
            )
        plain = {key: value for key, value in entry.items() if key not in ("type", "oauth")}
    else:
        raise ClientConfigError(path, f"unknown server type {kind!r} (known: local, remote)", entry=name)
    return clients.classify(name, plain, path), plain


def _opencode_view(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    command = entry.get("command")
    if not isinstance(command, list) or not command:
        return {}
    return {"command": command[0], "args": command[1:]}


def _opencode_write(plain: dict[str, Any]) -> dict[str, Any]:
    """A plain stdio entry as OpenCode's ``local`` one, keys in their order (``enabled``, ``timeout`` kept)."""
    entry: dict[str, Any] = {"type": "local"}
    for key, value in plain.items():
        if key == "command":
            entry["command"] = [value, *plain.get("args", [])]
        elif key == "env":
            entry["environment"] = value
        elif key not in ("args", "type"):
            entry[key] = value
    return entry


OPENCODE: Final = EntryFormat("opencode", _opencode_read, _opencode_view, _opencode_write, _opencode_holds)

FORMATS: Final[dict[str, EntryFormat]] = {each.name: each for each in (STANDARD, COPILOT, GEMINI, OPENCODE)}


def journals_of(view: Mapping[str, Any], base: str) -> list[tuple[str, str]]:
    """The (journal, workflow) pairs an entry that runs ``checkpoint`` writes to (relative paths are relative to
    ``base``; a PostgreSQL URL as `init` writes it, without its password: ``journal.without_password``)."""
    from checkpoint_mcp.journal import default_workflow_id, is_postgres_url, without_password
    from checkpoint_mcp.session.journals import pair_options

    args = view.get("args", [])
    strings = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    pairs = []
    for spec in pair_options(strings):
        location = spec.location
        if is_postgres_url(location):
            location = without_password(location)
        else:
            location = os.path.join(base, os.path.expanduser(location))
        pairs.append((location, spec.workflow or default_workflow_id(location)))
    return pairs


def pairs_args(journals: Iterable[tuple[str, str]]) -> list[str]:
    """``--journal J --workflow-id W`` for each pair (``wrap.journal_args``)."""
    args: list[str] = []
    for location, workflow in journals:
        args += wrap.journal_args(location, workflow)
    return args
