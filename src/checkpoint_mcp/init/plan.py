"""One run of `checkpoint init`: every file's new text, decided before anything is written.

``plan`` reads the client's file (and, for Claude Code, the project's ``.claude/settings.json``), wraps each
server that does not run ``checkpoint`` yet, adds the session server and the SessionStart hook where missing,
and returns the changes. A file it cannot read, or an entry of a shape it does not know, raises before
anything is written. Run twice, the second plan is empty.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init import clients, scopes, wrap
from checkpoint_mcp.init.files import Change, load_json, render_json

STATE_FOLDER: Final = ".checkpoint"
DEFAULT_JOURNAL: Final = os.path.join(STATE_FOLDER, "journal.db")
STARTER_POLICY: Final = os.path.join(STATE_FOLDER, "policy.toml")
GITIGNORE: Final = os.path.join(STATE_FOLDER, ".gitignore")

STARTER_POLICY_TEXT: Final = """\
# Tool policies for the servers `checkpoint init` wrapped (a starter, written by `checkpoint init`; edit freely).
#
# A policy tells the journaling proxy what to do with a call that carries no sequence and no key (most agents
# send neither): with `repeat = "refuse"`, a call whose tool and arguments equal one that COMPLETED in the same
# workflow within `window` is refused instead of run again, so a resumed agent cannot send the same e-mail twice.
# `repeat = "replay"` returns the stored result instead; `repeat = "allow"` runs it again (the proxy's behaviour
# without a policy). Tools that only read should not be journaled, so that reading twice reads afresh:
#
#   [tools."read_*"]                # a glob; an exact name wins over it
#   journal = false
#
#   [tools.send_email]
#   repeat = "replay"
#
# To use this file, run `checkpoint init --undo`, then `checkpoint init --policy .checkpoint/policy.toml`, which
# gives every wrapped server `--policy`. The keys: docs/policies.md.

[default]                           # tools no rule names
repeat = "refuse"
window = "24h"
"""

GITIGNORE_TEXT: Final = """\
# Written by `checkpoint init`: the journal and the originals init kept stay out of version control.
journal.db*
init/
"""


@dataclass(frozen=True)
class Request:
    """What `checkpoint init` was asked to do."""

    project: str
    client: str = clients.CLAUDE_CODE
    journal: str | None = None
    policy: str | None = None
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    scopes: tuple[str, ...] = scopes.SCOPES
    """Claude Code's scopes to wrap (``scopes``); other clients have only their file."""
    launcher: wrap.Launcher = field(default_factory=lambda: wrap.Launcher("checkpoint"))
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    """The files to write, and what they say."""

    changes: list[Change] = field(default_factory=list)
    wrapped: list[str] = field(default_factory=list)
    left_alone: list[tuple[str, str]] = field(default_factory=list)
    """(server, why) for every server `init` did not touch."""
    session: str | None = None
    """The name under which the session server was added."""
    session_journals: list[tuple[str, int]] = field(default_factory=list)
    """(session server, journals added) for a session server that did not list every wrapped server's journal."""
    upgraded: list[str] = field(default_factory=list)
    """Servers an older `init` wrapped whose headers now go by ``--upstream-header-env``."""
    hook: bool = False
    starter_policy: str | None = None
    scoped: list[scopes.Wrapped] = field(default_factory=list)
    """The servers of Claude Code's ``~/.claude.json`` (local and user scope) wrapped."""


def plan(request: Request) -> Plan:
    """Decide every change of one run of `checkpoint init`; nothing is written.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server the file does not have.
    """
    project = os.path.abspath(request.project)
    client = clients.CLIENTS[request.client]
    path = clients.config_path(client, project, request.environ)
    journal = _journal(request.journal, project)
    result = Plan()
    policy = os.path.abspath(os.path.expanduser(request.policy)) if request.policy else None
    wrapping = wrap.Wrapping(request.launcher, journal, policy)

    loaded = load_json(path)
    document = copy.deepcopy(loaded.value)
    servers = clients.servers_of(document, client, path)
    found = None
    if client.name == clients.CLAUDE_CODE:
        found = scopes.read_for(project, request.environ, request.scopes)
    if found is None:
        _check_names(path, servers, request.only, request.skip)
    else:
        _check_names(f"{path} or {found.loaded.path}", {**found.names(), **servers}, request.only, request.skip)
    journals, sessions = _wrap_servers(servers, request, wrapping, project, path, result)
    _session_servers(servers, sessions, journals, wrapping, project, client, result)
    if servers and client.servers_key not in document:
        document[client.servers_key] = servers
    if document != loaded.value:
        result.changes.append(Change(path, loaded.raw, render_json(document, loaded.raw)))
    if client.hook:
        hook_change = _hook_change(project, request.launcher)
        if hook_change is not None:
            result.changes.append(hook_change)
            result.hook = True
    if found is not None:
        asked = scopes.Asked(request.scopes, request.only, request.skip, wrapping, request.environ)
        result.changes += scopes.plan(found, asked, result.left_alone, result.scoped)
    if result.changes:
        result.changes += _state_files(project, result, starter=policy is None)
    return result


def _wrap_servers(
    servers: dict[str, Any], request: Request, wrapping: wrap.Wrapping, project: str, path: str, result: Plan
) -> tuple[list[tuple[str, str]], list[str]]:
    """Wrap (in ``servers``) every server to wrap; returns the (journal, workflow) pairs of every server that runs
    through ``checkpoint`` now, and the session servers to bring up to date once those are all known."""
    journals: list[tuple[str, str]] = []
    sessions: list[str] = []
    for name in list(servers):
        entry = servers[name]
        session = isinstance(entry, dict) and wrap.is_session_server(entry)
        # --only picks servers to wrap; the session server is not one, so only --skip keeps it as it is.
        if name in request.skip or (request.only and name not in request.only and not session):
            result.left_alone.append((name, "skipped"))
        elif scopes.PROJECT not in request.scopes and not session:
            result.left_alone.append((name, scopes.left_out(scopes.PROJECT)))
        elif session:
            sessions.append(name)
        elif isinstance(entry, dict) and wrap.runs_checkpoint(entry):
            upgraded = wrap.upgrade_headers(entry)
            if upgraded is not None:
                servers[name] = upgraded
                result.upgraded.append(name)
            else:
                result.left_alone.append((name, "already runs checkpoint"))
            journals += _journals_of(entry, project)
        else:
            shape = clients.classify(name, entry, path)
            clients.check_env(name, entry, path)
            servers[name] = wrap.wrap(name, entry, shape, wrapping)
            result.wrapped.append(name)
            journals.append((wrapping.journal, name))
    return journals, sessions


def _session_servers(
    servers: dict[str, Any],
    sessions: Sequence[str],
    journals: Sequence[tuple[str, str]],
    wrapping: wrap.Wrapping,
    project: str,
    client: clients.Client,
    result: Plan,
) -> None:
    """Add the session server if the file has none; else give each one that lists journals (every client but
    Claude Code) the journals of servers wrapped since, so that it reads every wrapped server's journal."""
    if not any(isinstance(e, dict) and wrap.is_session_server(e) for e in servers.values()):
        result.session = wrap.free_server_name(servers)
        servers[result.session] = wrap.session_entry(wrapping, journals, project, finds_project=client.finds_journals)
    for name in sessions:
        missing = [] if client.finds_journals else _missing(journals, _journals_of(servers[name], project))
        if missing:
            servers[name] = wrap.with_journals(servers[name], missing)
            result.session_journals.append((name, len(missing)))
        else:
            result.left_alone.append((name, "already runs checkpoint"))


def _journal(given: str | None, project: str) -> str:
    if given is None:
        return os.path.join(project, DEFAULT_JOURNAL)
    if given.startswith(("postgresql://", "postgres://")):
        return given
    return os.path.abspath(os.path.expanduser(given))


def _check_names(path: str, servers: Mapping[str, Any], only: Sequence[str], skip: Sequence[str]) -> None:
    unknown = [name for name in (*only, *skip) if name not in servers]
    if unknown:
        have = ", ".join(servers) or "none"
        raise InitError(f"{path} has no server named {', '.join(map(repr, unknown))} (it has: {have})")


def _journals_of(entry: Mapping[str, Any], project: str) -> list[tuple[str, str]]:
    """The (journal, workflow) pairs an entry that already runs ``checkpoint`` writes to (relative paths are
    relative to the project, as the session server reads them from ``.mcp.json``)."""
    from checkpoint_mcp.journal import default_workflow_id
    from checkpoint_mcp.session.journals import pair_options

    args = entry.get("args", [])
    strings = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
    pairs = []
    for spec in pair_options(strings):
        location = spec.location
        if not location.startswith(("postgresql://", "postgres://")):
            location = os.path.join(project, os.path.expanduser(location))
        pairs.append((location, spec.workflow or default_workflow_id(location)))
    return pairs


def _missing(journals: Sequence[tuple[str, str]], listed: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (journal, workflow) pairs of ``journals`` that ``listed`` lacks, in order, each once."""
    missing: list[tuple[str, str]] = []
    for pair in journals:
        if pair not in listed and pair not in missing:
            missing.append(pair)
    return missing


def _hook_change(project: str, launcher: wrap.Launcher) -> Change | None:
    path = clients.settings_path(project)
    loaded = load_json(path)
    if not isinstance(loaded.value, dict):
        raise ClientConfigError(path, "the file is not a JSON object")
    if wrap.has_brief_hook(loaded.value):
        return None
    settings = copy.deepcopy(loaded.value)
    problem = wrap.add_brief_hook(settings, launcher.shell("brief", "--hook"))
    if problem is not None:
        raise ClientConfigError(path, problem)
    return Change(path, loaded.raw, render_json(settings, loaded.raw))


def _state_files(project: str, result: Plan, *, starter: bool) -> list[Change]:
    """The starter policy (when none was given) and the ``.gitignore`` of ``.checkpoint``, if missing."""
    changes = []
    if starter and not os.path.exists(os.path.join(project, STARTER_POLICY)):
        result.starter_policy = os.path.join(project, STARTER_POLICY)
        changes.append(Change(result.starter_policy, None, STARTER_POLICY_TEXT.encode()))
    if not os.path.exists(os.path.join(project, GITIGNORE)):
        changes.append(Change(os.path.join(project, GITIGNORE), None, GITIGNORE_TEXT.encode()))
    return changes


def summary(result: Plan, *, dry_run: bool) -> list[str]:
    """What a run did (or, with ``dry_run``, would do), one line each, for the terminal."""
    verb = "would wrap" if dry_run else "wrapped"
    lines = []
    if result.wrapped:
        lines.append(f"{verb}: {', '.join(result.wrapped)}")
    lines += scopes.summary(result.scoped, dry_run=dry_run)
    if result.upgraded:
        lines.append(f"{'would move' if dry_run else 'moved'} to --upstream-header-env: {', '.join(result.upgraded)}")
    lines += [f"left alone: {name} ({why})" for name, why in result.left_alone]
    for name, added in result.session_journals:
        lines.append(f"{'would give' if dry_run else 'gave'} the session server {name!r} {added} more journal(s)")
    if result.session:
        lines.append(f"{'would add' if dry_run else 'added'} the session server as {result.session!r}")
    if result.hook:
        lines.append(f"{'would add' if dry_run else 'added'} the SessionStart hook `checkpoint brief --hook`")
    if result.starter_policy:
        lines.append(
            f"{'would write' if dry_run else 'wrote'} a starter policy at {result.starter_policy} (not in use "
            "until given with --policy)"
        )
    if not result.changes:
        lines.append("nothing to change: every server already runs checkpoint")
    elif dry_run:
        lines.append("dry run: nothing was written")
    else:
        lines.append("originals kept; `checkpoint init --undo` puts them back")
    return lines
