"""One run of `checkpoint init`: every file's new text, decided before anything is written.

``plan`` reads the client's file (and, for Claude Code, the project's ``.claude/settings.json``), wraps each
server that does not run ``checkpoint`` yet, adds the session server and the SessionStart hook where missing,
and returns the changes. A file it cannot read, or an entry of a shape it does not know, raises before
anything is written. Run twice, the second plan is empty.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init import clients, policies, wrap
from checkpoint_mcp.init.files import Change, load_json, render_json

STATE_FOLDER: Final = ".checkpoint"
DEFAULT_JOURNAL: Final = os.path.join(STATE_FOLDER, "journal.db")
GITIGNORE: Final = os.path.join(STATE_FOLDER, ".gitignore")

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
    no_policy: bool = False
    """No policy at all (``--no-policy``); else, without ``policy``, one is written for each server."""
    tools_of: policies.ToolLister | None = None
    """Asks the servers for their tools (None: none is asked, each gets ``[default]`` alone)."""
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
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
    hook: bool = False
    policies: list[str] = field(default_factory=list)
    """The policy files written, one per server asked."""
    unasked: list[tuple[str, str, str]] = field(default_factory=list)
    """(server, why, the command that writes its tables later) for every server whose tools could not be
    listed: its file has ``[default]`` alone."""
    unhinted: list[tuple[str, list[str]]] = field(default_factory=list)
    """(server, tools) whose tools carry no hints at all: the ones to review first."""


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
    _check_names(path, servers, request.only, request.skip)
    journals: list[tuple[str, str]] = []
    own_policy = policy is None and not request.no_policy
    taken: set[str] = set()
    to_ask: dict[str, tuple[policies.Server, str]] = {}
    for name in list(servers):
        entry = servers[name]
        if name in request.skip or (request.only and name not in request.only):
            result.left_alone.append((name, "skipped"))
            continue
        if isinstance(entry, dict) and wrap.runs_checkpoint(entry):
            result.left_alone.append((name, "already runs checkpoint"))
            if not wrap.is_session_server(entry):
                journals += _journals_of(entry, project)
            continue
        shape = clients.classify(name, entry, path)
        env = clients.check_env(name, entry, path)
        server_wrapping = wrapping
        if own_policy:
            server_wrapping = _own_policy(project, name, entry, shape, env, wrapping, taken, to_ask)
        servers[name] = wrap.wrap(name, entry, shape, server_wrapping)
        result.wrapped.append(name)
        journals.append((journal, name))
    if not any(isinstance(e, dict) and wrap.is_session_server(e) for e in servers.values()):
        result.session = wrap.free_server_name(servers)
        servers[result.session] = wrap.session_entry(wrapping, journals, project, finds_project=client.finds_journals)
    if servers and client.servers_key not in document:
        document[client.servers_key] = servers
    if document != loaded.value:
        result.changes.append(Change(path, loaded.raw, render_json(document, loaded.raw)))
    if client.hook:
        hook_change = _hook_change(project, request.launcher)
        if hook_change is not None:
            result.changes.append(hook_change)
            result.hook = True
    if result.changes:
        result.changes += _policy_changes(to_ask, request.tools_of, result)
        result.changes += _state_files(project)
    return result


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


def _own_policy(
    project: str,
    name: str,
    entry: Mapping[str, Any],
    shape: clients.StdioEntry | clients.HttpEntry,
    env: dict[str, str],
    wrapping: wrap.Wrapping,
    taken: set[str],
    to_ask: dict[str, tuple[policies.Server, str]],
) -> wrap.Wrapping:
    """The wrapping of one server with its own policy file; a file not there yet is to be written from the
    server's tools (noted in ``to_ask``), one already there (an earlier init's, or the user's) is used as it is."""
    path = policies.policy_path(project, name, taken)
    if not os.path.exists(path):
        cwd = entry.get("cwd")
        folder = os.path.join(project, os.path.expanduser(cwd)) if isinstance(cwd, str) and cwd else project
        to_ask[name] = (policies.Server(name, shape, env, folder), path)
    return dataclasses.replace(wrapping, policy=path)


def _policy_changes(
    to_ask: Mapping[str, tuple[policies.Server, str]], tools_of: policies.ToolLister | None, result: Plan
) -> list[Change]:
    """Each new policy file, written from what its server listed (all asked at once), or ``[default]`` alone."""
    listed = tools_of([server for server, _ in to_ask.values()]) if tools_of is not None and to_ask else {}
    changes = []
    for name, (server, path) in to_ask.items():
        tools = listed.get(name, "not asked")
        if isinstance(tools, str):
            result.unasked.append((name, tools, policies.suggest_command(server)))
            text = policies.unasked(name, tools)
        else:
            text = policies.suggest(name, tools)
            bare = [str(tool.get("name")) for tool in tools if policies.has_no_hints(tool)]
            if bare:
                result.unhinted.append((name, bare))
        result.policies.append(path)
        changes.append(Change(path, None, text.encode()))
    return changes


def _state_files(project: str) -> list[Change]:
    """The ``.gitignore`` of ``.checkpoint``, if missing."""
    changes = []
    if not os.path.exists(os.path.join(project, GITIGNORE)):
        changes.append(Change(os.path.join(project, GITIGNORE), None, GITIGNORE_TEXT.encode()))
    return changes


def summary(result: Plan, *, dry_run: bool) -> list[str]:
    """What a run did (or, with ``dry_run``, would do), one line each, for the terminal."""
    verb = "would wrap" if dry_run else "wrapped"
    lines = []
    if result.wrapped:
        lines.append(f"{verb}: {', '.join(result.wrapped)}")
    lines += [f"left alone: {name} ({why})" for name, why in result.left_alone]
    if result.session:
        lines.append(f"{'would add' if dry_run else 'added'} the session server as {result.session!r}")
    if result.hook:
        lines.append(f"{'would add' if dry_run else 'added'} the SessionStart hook `checkpoint brief --hook`")
    lines += _policy_summary(result, dry_run=dry_run)
    if not result.changes:
        lines.append("nothing to change: every server already runs checkpoint")
    elif dry_run:
        lines.append("dry run: nothing was written")
    else:
        lines.append("originals kept; `checkpoint init --undo` puts them back")
    return lines


def _policy_summary(result: Plan, *, dry_run: bool) -> list[str]:
    """The policy files written, the tools to review first, and the servers that could not be asked."""
    lines = []
    if result.policies:
        folder = os.path.dirname(result.policies[0])
        lines.append(
            f"{'would write' if dry_run else 'wrote'} {len(result.policies)} active policies in {folder} "
            "(each wrapped server gets its own with --policy)"
        )
    for server, tools in result.unhinted:
        lines.append(
            f"review first: {server}'s tools {', '.join(tools)} have no hints, so a repeat is refused; "
            "a tool that only reads wants journal = false"
        )
    for server, why, command in result.unasked:
        lines.append(
            f"warning: {server} could not be asked for its tools ({why}); its policy has [default] alone "
            f"(repeat refused within 24h). Write its tables later: {command}"
        )
    return lines
