"""One run of `init` for a client the table describes whole: its JSON files per scope, read and wrapped in its own
entry format, the session server, and the brief its sessions get (OpenCode, GitHub Copilot CLI, Cline, Qwen Code).

For each scope asked that the client has (``clients.Client.scopes``), every file of that scope is read (a missing
one has no servers; a JSONC file with comments is refused by name) and each server in it is wrapped: a project
file's with the project's journal, a user file's each with a journal of its own under the user's data folder (such a
server runs in every project, as Claude Code's user scope does). The session server goes in the first project file
(for Cline, which has only a user file, in that file, with no project named: Cline starts it in the project it
works in); a session server already there gets the journals of servers wrapped since. Then the brief: the hook or
plugin ``briefs`` writes for the client, naming every journal its wrapped servers write to.

Nothing is written here: the changes go back to ``plan``, which adds the policies and the state files.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init import briefs, claude_json, clients, formats, scopes, wrap
from checkpoint_mcp.init.files import Change, Loaded, load_json, render_json
from checkpoint_mcp.init.outcome import Outcome, missing_journals


@dataclass
class File:
    """One file of servers as read, and a copy of it whose servers `init` changes."""

    scope: str
    loaded: Loaded
    document: dict[str, Any]
    servers: dict[str, Any]

    def change(self, key: str) -> Change | None:
        """The file's change, or None when nothing in it changed."""
        if self.servers and key not in self.document:
            self.document[key] = self.servers
        if self.document == self.loaded.value:
            return None
        return Change(self.loaded.path, self.loaded.raw, render_json(self.document, self.loaded.raw))


def read(client: clients.Client, asked: scopes.Asked) -> list[File]:
    """Every file of the client's scopes (a missing one has no servers; a file of a scope not asked is read too,
    to name its servers as left out).

    Raises:
        ClientConfigError: a file of a scope asked cannot be read, holds comments, is not JSON, or its servers
            table is not an object.
    """
    paths = [(scopes.PROJECT, os.path.join(asked.project, name)) for name in client.project_files]
    if client.user_file is not None:
        paths.append((scopes.USER, client.user_file.path(asked.environ)))
    found = []
    for scope, path in paths:
        try:
            loaded = load_json(path, comments_refused=True)
            document = copy.deepcopy(loaded.value)
            servers = clients.servers_of(document, client, path)
        except ClientConfigError:
            if scope in asked.scopes:
                raise
            continue
        assert isinstance(document, dict)
        found.append(File(scope, loaded, document, servers))
    return found


def plan(client: clients.Client, asked: scopes.Asked, outcome: Outcome) -> None:
    """The changes to every file of ``client`` and its brief's hook or plugin, in ``outcome``; nothing is written.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server no file has.
    """
    entries = formats.FORMATS[client.entry_format]
    found = read(client, asked)
    known = {name for file in found for name in file.servers}
    unknown = [name for name in (*asked.only, *asked.skip) if name not in known]
    if unknown:
        files = " or ".join(file.loaded.path for file in found) or "its files"
        have = ", ".join(sorted(known)) or "none"
        raise InitError(f"{files} have no server named {', '.join(map(repr, unknown))} (they have: {have})")
    journals: list[tuple[str, str]] = []
    sessions: list[tuple[File, str]] = []
    for file in found:
        journals += _wrap_file(file, entries, asked, outcome, sessions, client.start_keys)
    home = _session_home(client, found, asked)
    if home is not None and not sessions and journals:
        outcome.session = wrap.free_server_name(home.servers)
        home.servers[outcome.session] = _session_entry(client, entries, asked, journals)
    for file, name in sessions:
        if file.loaded.path in _shared(client, asked.project):
            # Another client's file (Claude Code's .mcp.json): its session server is its own, left as it is.
            outcome.left_alone.append((name, "already runs checkpoint"))
            continue
        base = asked.project if file.scope == scopes.PROJECT else os.path.dirname(file.loaded.path)
        missing = missing_journals(journals, formats.journals_of(entries.view(file.servers[name]), base))
        if missing:
            file.servers[name] = _with_journals(entries, file.servers[name], missing)
            outcome.session_journals.append((name, len(missing)))
        else:
            outcome.left_alone.append((name, "already runs checkpoint"))
    if journals and client.brief is not None:
        _brief(client, found, asked, briefs.unique(journals), outcome)
    outcome.changes[:0] = [change for file in found if (change := file.change(client.servers_key)) is not None]
    if outcome.changes:
        names = [w.name for w in outcome.wrapped if w.scope == scopes.PROJECT] + (
            [outcome.session] if outcome.session else []
        )
        for note in client.notes:
            outcome.notes.append(note.format(project=asked.project, servers=", ".join(names) or "them"))


def _brief(
    client: clients.Client,
    found: list[File],
    asked: scopes.Asked,
    journals: tuple[tuple[str, str], ...],
    outcome: Outcome,
) -> None:
    """Write or bring up to date the client's brief hook or plugin (Qwen's in its project settings, the others' in
    files of their own).

    Raises:
        ClientConfigError: a hook file cannot be read, or is not of its client's shape.
    """
    assert client.brief is not None
    brief = briefs.Brief(asked.project, asked.wrapping.launcher, journals)
    if client.brief != "qwen-settings":
        owned = briefs.owned_changes(client.brief, brief)
        if owned:
            outcome.brief = briefs.where(client.brief)
        outcome.changes += owned
        return
    project_file = next((f for f in found if f.scope == scopes.PROJECT), None)
    if project_file is None:
        path = os.path.join(asked.project, client.project_files[0])
        project_file = File(scopes.PROJECT, Loaded(path, None, {}), {}, {})
        found.insert(0, project_file)
    if briefs.settings_hook(project_file.document, project_file.loaded.path, brief):
        outcome.brief = briefs.where(client.brief)


def _wrap_file(
    file: File,
    entries: formats.EntryFormat,
    asked: scopes.Asked,
    outcome: Outcome,
    sessions: list[tuple[File, str]],
    start_keys: Sequence[tuple[str, object]],
) -> list[tuple[str, str]]:
    """Wrap every server of one file that is asked for (each wrapped entry gets ``start_keys`` it lacks: the
    client's ``Client.start_keys``); returns the (journal, workflow) pairs of every server of the file that runs
    through the proxy now, and notes its session servers in ``sessions``.

    Raises:
        ClientConfigError: an entry is of a shape `init` does not know.
    """
    journals: list[tuple[str, str]] = []
    path = file.loaded.path
    base = asked.project if file.scope == scopes.PROJECT else os.path.dirname(path)
    for name in list(file.servers):
        entry = file.servers[name]
        view = entries.view(entry) if isinstance(entry, dict) else {}
        if wrap.is_session_server(view):
            if name not in asked.skip:
                sessions.append((file, name))
            continue
        if file.scope not in asked.scopes:
            outcome.left_alone.append((name, scopes.left_out(file.scope)))
        elif name in asked.skip or (asked.only and name not in asked.only):
            outcome.left_alone.append((name, "skipped"))
        elif wrap.runs_checkpoint(view):
            outcome.left_alone.append((name, "already runs checkpoint"))
            journals += formats.journals_of(view, base)
        else:
            shape, plain = entries.read(name, entry, path)
            env = clients.check_env(name, plain, path)
            wrapping = asked.wrapping
            if file.scope == scopes.USER:
                journal = claude_json.user_journal(name, asked.environ)
                wrapping = wrap.Wrapping(wrapping.launcher, journal, wrapping.policy)
            if asked.policy_of is not None:
                wrapping = asked.policy_of(file.scope, name, plain, shape, env, wrapping)
            wrapped = entries.write(wrap.wrap(name, plain, shape, wrapping, entries.holds_variable))
            for key, value in start_keys:
                wrapped.setdefault(key, copy.deepcopy(value))
            file.servers[name] = wrapped
            outcome.wrapped.append(scopes.Wrapped(file.scope, name, wrapping.journal, path))
            journals.append((wrapping.journal, name))
    return journals


def _session_home(client: clients.Client, found: list[File], asked: scopes.Asked) -> File | None:
    """The file the session server goes in: the first project file (added to ``found`` when missing), or the user
    file of a client that has no project file; None when its scope is not asked."""
    if client.project_files:
        if scopes.PROJECT not in asked.scopes:
            return None
        first = os.path.join(asked.project, client.project_files[0])
        for file in found:
            if file.loaded.path == first:
                return file
        made = File(scopes.PROJECT, Loaded(first, None, {}), {}, {})
        found.insert(0, made)
        return made
    if scopes.USER not in asked.scopes:
        return None
    return next((file for file in found if file.scope == scopes.USER), None)


def _session_entry(
    client: clients.Client, entries: formats.EntryFormat, asked: scopes.Asked, journals: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """The session server in the client's shape, with every journal; a project file's names the project, a user
    file's (Cline) does not: the client starts it in the project it works in."""
    pairs = briefs.unique(journals)
    entry = wrap.session_entry(asked.wrapping, pairs, asked.project, finds_project=False)
    if not client.project_files:
        entry.pop("env", None)
    for key, value in client.session_keys:
        entry[key] = copy.deepcopy(value)
    return entries.write(entry)


def _with_journals(entries: formats.EntryFormat, entry: dict[str, Any], journals: Sequence[tuple[str, str]]) -> Any:
    """A session server entry with more journals, in the client's shape."""
    if entries.name == "opencode":
        return {**entry, "command": [*entry["command"], *formats.pairs_args(journals)]}
    return wrap.with_journals(entry, journals)


def _shared(client: clients.Client, project: str) -> set[str]:
    """The client's project files that another client writes too (Copilot's and Qwen's ``.mcp.json``)."""
    return {os.path.join(project, name) for name in client.project_files[1:]}
