"""One run of `checkpoint init`: every file's new text, decided before anything is written.

``plan`` takes the client's entry of the table (``clients.CLIENTS``) and has its files planned by the planner its
entry names (``planner``): the JSON files here (``_plan_json``: the client's file, and for Claude Code the
project's ``.claude/settings.json`` and ``~/.claude.json``), Codex's TOML (``codex``), or the clients the table
describes whole (``client_files``). Each wraps every server that does not run ``checkpoint`` yet, adds the session
server and the brief's hook or plugin where missing (and widens the matcher of a hook an older ``init`` wrote)
into the one ``outcome.Outcome``; then the policies, the state files and the session checkpoint file's
git-ignore line are added the same way for all. A file it cannot read, or an entry of a shape it does not know,
raises before anything is written. Run twice, the second plan is empty.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init import (
    briefs,
    claude_json,
    client_files,
    clients,
    codex,
    formats,
    gemini,
    policies,
    scopes,
    wrap,
)
from checkpoint_mcp.init.files import Change, load_json, render_json
from checkpoint_mcp.init.outcome import CHECKPOINT_IGNORED, Outcome, missing_journals

STATE_FOLDER: Final = ".checkpoint"
DEFAULT_JOURNAL: Final = os.path.join(STATE_FOLDER, "journal.db")
GITIGNORE: Final = os.path.join(STATE_FOLDER, ".gitignore")

PROJECT_GITIGNORE: Final = ".gitignore"
CHECKPOINT_IGNORE_TEXT: Final = (
    "# Written by `checkpoint init`: the session checkpoint (and its backup and temp files) is not source.\n"
    f"{CHECKPOINT_IGNORED}\n"
)

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
    scopes: tuple[str, ...] = scopes.SCOPES
    """Claude Code's scopes to wrap (``scopes``); other clients have only their file."""
    launcher: wrap.Launcher = field(default_factory=lambda: wrap.Launcher("checkpoint"))
    environ: Mapping[str, str] = field(default_factory=dict)


def plan(request: Request) -> Outcome:
    """Decide every change of one run of `checkpoint init`; nothing is written.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server the file does not have.
    """
    project = os.path.abspath(request.project)
    client = clients.CLIENTS[request.client]
    journal = _journal(request.journal, project)
    result = Outcome(client=client.name)
    policy = os.path.abspath(os.path.expanduser(request.policy)) if request.policy else None
    wrapping = wrap.Wrapping(request.launcher, journal, policy)
    planner = {"json": _plan_json, "codex": _plan_codex, "files": _plan_files}[client.planner]
    planner(request, client, project, wrapping, result)
    return result


def _plan_json(
    request: Request, client: clients.Client, project: str, wrapping: wrap.Wrapping, result: Outcome
) -> None:
    """``plan`` for a client whose servers are in one JSON file of the project (Claude Code's ``.mcp.json``, with
    its ``~/.claude.json`` scopes; Gemini CLI's settings, with its user file; Cursor, VS Code) or of the user
    (Claude Desktop), its hook where it has one, and the policies and state files.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server no file has.
    """
    path = clients.config_path(client, project, request.environ)
    loaded = load_json(path)
    document = copy.deepcopy(loaded.value)
    servers = clients.servers_of(document, client, path)
    found, user = _user_files(client, project, request, path, servers)
    own_policy = wrapping.policy is None and not request.no_policy
    to_ask: dict[str, tuple[policies.Server, str]] = {}
    taken: set[str] = set()
    journals, sessions = _wrap_servers(
        servers, request, wrapping, project, (client, path), result, own_policy, to_ask, taken
    )
    _session_servers(servers, sessions, journals, wrapping, project, client, result)
    if servers and client.servers_key not in document:
        document[client.servers_key] = servers
    if client.brief == "gemini-settings":
        _gemini_hook(client, document, path, request.launcher, result)
    if document != loaded.value:
        result.changes.append(Change(path, loaded.raw, render_json(document, loaded.raw)))
    _owned_hook(client, project, request.launcher, journals, result)
    if client.hook:
        hook_change = _hook_change(project, request.launcher)
        if hook_change is not None:
            result.changes.append(hook_change[0])
            if hook_change[1]:
                result.hook_repaired = True
            else:
                result.brief = briefs.where(client.brief or "claude-settings")
    ignore = _ignore_checkpoint_file(project)
    if ignore is not None and (result.changes or any(wrap.is_session_server(e) for e in _entries(servers))):
        result.changes.append(ignore)
        result.ignored_checkpoint = True
    if found is not None or user is not None:
        policy_of = _policy_of(project, request.environ, taken, to_ask) if own_policy else None
        asked = scopes.Asked(project, request.scopes, request.only, request.skip, wrapping, request.environ, policy_of)
        if found is not None:
            result.changes += scopes.plan(found, asked, result.left_alone, result.wrapped)
        if user is not None:
            result.changes += gemini.plan_user(user, asked, result.left_alone, result.wrapped)
    if result.changes:
        result.changes += _policy_changes(to_ask, request.tools_of, result)
        result.changes += _state_files(project)


def _user_files(
    client: clients.Client, project: str, request: Request, path: str, servers: Mapping[str, Any]
) -> tuple[scopes.Found | None, gemini.UserFile | None]:
    """The client's files of servers beyond the project's (Claude Code's ``~/.claude.json``, Gemini's user
    settings), read; and every name of ``--only`` and ``--skip`` checked against all of them.

    Raises:
        ClientConfigError: a file cannot be read.
        InitError: --only or --skip names a server no file has.
    """
    found = user = None
    if client.brief == "claude-settings":
        found = scopes.read_for(project, request.environ, request.scopes)
    elif client.brief == "gemini-settings":
        user = gemini.read_user(request.environ)
    if found is not None:
        _check_names(f"{path} or {found.loaded.path}", {**found.names(), **servers}, request.only, request.skip)
    elif user is not None:
        _check_names(f"{path} or {user.loaded.path}", {**user.servers, **servers}, request.only, request.skip)
    else:
        _check_names(path, servers, request.only, request.skip)
    return found, user


def _policy_of(
    project: str, environ: Mapping[str, str], taken: set[str], to_ask: dict[str, tuple[policies.Server, str]]
) -> scopes.PolicyOf:
    """Gives a server of a client's own file its own policy: a local-scope one in the project's policies folder,
    as the project's get; a user-scope one beside its journal in the user's data folder."""
    user_taken: set[str] = set()

    def policy_of(
        scope: str,
        name: str,
        entry: Mapping[str, Any],
        shape: clients.StdioEntry | clients.HttpEntry,
        env: dict[str, str],
        how: wrap.Wrapping,
    ) -> wrap.Wrapping:
        if scope == scopes.USER:
            folder = policies.user_policies_folder(claude_json.user_journal_folder(environ))
            return _own_policy(project, folder, name, entry, shape, env, how, user_taken, to_ask)
        folder = os.path.join(project, policies.POLICIES_FOLDER)
        return _own_policy(project, folder, name, entry, shape, env, how, taken, to_ask)

    return policy_of


def _plan_codex(
    request: Request, client: clients.Client, project: str, wrapping: wrap.Wrapping, result: Outcome
) -> None:
    """``plan`` for Codex's ``config.toml`` files (``init.codex``), with the same policies and state files.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server neither file has.
    """
    to_ask: dict[str, tuple[policies.Server, str]] = {}
    taken: set[str] = set()
    own_policy = request.policy is None and not request.no_policy
    policy_of = _policy_of(project, request.environ, taken, to_ask) if own_policy else None
    asked = scopes.Asked(project, request.scopes, request.only, request.skip, wrapping, request.environ, policy_of)
    codex.plan(asked, result)
    if result.session is not None or result.changes:
        ignore = _ignore_checkpoint_file(project)
        if ignore is not None:
            result.changes.append(ignore)
            result.ignored_checkpoint = True
    if result.changes:
        result.changes += _policy_changes(to_ask, request.tools_of, result)
        result.changes += _state_files(project)


def _plan_files(
    request: Request, client: clients.Client, project: str, wrapping: wrap.Wrapping, result: Outcome
) -> None:
    """``plan`` for a client the table describes whole (``client_files``), with the same policies and state files.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server no file has.
    """
    to_ask: dict[str, tuple[policies.Server, str]] = {}
    taken: set[str] = set()
    own_policy = request.policy is None and not request.no_policy
    policy_of = _policy_of(project, request.environ, taken, to_ask) if own_policy else None
    scoped = tuple(scope for scope in request.scopes if scope in client.scopes())
    asked = scopes.Asked(project, scoped, request.only, request.skip, wrapping, request.environ, policy_of)
    client_files.plan(client, asked, result)
    if result.changes:
        ignore = _ignore_checkpoint_file(project)
        if ignore is not None:
            result.changes.append(ignore)
            result.ignored_checkpoint = True
        result.changes += _policy_changes(to_ask, request.tools_of, result)
        result.changes += _state_files(project)


def _wrap_servers(
    servers: dict[str, Any],
    request: Request,
    wrapping: wrap.Wrapping,
    project: str,
    where: tuple[clients.Client, str],
    result: Outcome,
    own_policy: bool,
    to_ask: dict[str, tuple[policies.Server, str]],
    taken: set[str],
) -> tuple[list[tuple[str, str]], list[str]]:
    """Wrap (in ``servers``) every server to wrap, each with its own policy file when ``own_policy`` (those to
    write from the server's tools go in ``to_ask``); returns the (journal, workflow) pairs of every server that
    runs through ``checkpoint`` now, and the session servers to bring up to date once those are all known."""
    journals: list[tuple[str, str]] = []
    sessions: list[str] = []
    client, path = where
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
            shape, entry = _classify(client, name, entry, path)
            env = clients.check_env(name, entry, path)
            server_wrapping = wrapping
            if own_policy:
                folder = os.path.join(project, policies.POLICIES_FOLDER)
                server_wrapping = _own_policy(project, folder, name, entry, shape, env, wrapping, taken, to_ask)
            holds = formats.FORMATS[client.entry_format].holds_variable
            servers[name] = wrap.wrap(name, entry, shape, server_wrapping, holds_variable=holds)
            result.wrapped.append(scopes.Wrapped(scopes.PROJECT, name, wrapping.journal, path))
            journals.append((wrapping.journal, name))
    return journals, sessions


def _classify(
    client: clients.Client, name: str, entry: object, path: str
) -> tuple[clients.StdioEntry | clients.HttpEntry, dict[str, Any]]:
    """One entry's shape, and the entry as ``wrap.wrap`` takes it (Gemini's names its transport by key).

    Raises:
        ClientConfigError: the entry is of a shape `init` does not know.
    """
    return formats.FORMATS[client.entry_format].read(name, entry, path)


def _session_servers(
    servers: dict[str, Any],
    sessions: Sequence[str],
    journals: Sequence[tuple[str, str]],
    wrapping: wrap.Wrapping,
    project: str,
    client: clients.Client,
    result: Outcome,
) -> None:
    """Add the session server if the file has none; else give each one that lists journals (every client but
    Claude Code) the journals of servers wrapped since, so that it reads every wrapped server's journal."""
    if not any(isinstance(e, dict) and wrap.is_session_server(e) for e in servers.values()):
        result.session = wrap.free_server_name(servers)
        servers[result.session] = wrap.session_entry(wrapping, journals, project, finds_project=client.finds_journals)
    for name in sessions:
        missing = [] if client.finds_journals else missing_journals(journals, _journals_of(servers[name], project))
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
    return formats.journals_of(entry, project)


def _entries(servers: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [entry for entry in servers.values() if isinstance(entry, dict)]


def _hook_change(project: str, launcher: wrap.Launcher) -> tuple[Change, bool] | None:
    """The settings with the brief hook added, or with its matcher repaired (True), or None when it is right."""
    path = clients.settings_path(project)
    loaded = load_json(path)
    if not isinstance(loaded.value, dict):
        raise ClientConfigError(path, "the file is not a JSON object")
    settings = copy.deepcopy(loaded.value)
    repaired = wrap.has_brief_hook(settings)
    if repaired:
        if not wrap.repair_brief_matcher(settings):
            return None
    else:
        problem = wrap.add_brief_hook(settings, launcher.shell("brief", "--hook"))
        if problem is not None:
            raise ClientConfigError(path, problem)
    return Change(path, loaded.raw, render_json(settings, loaded.raw)), repaired


def _owned_hook(
    client: clients.Client,
    project: str,
    launcher: wrap.Launcher,
    journals: Sequence[tuple[str, str]],
    result: Outcome,
) -> None:
    """Cursor's ``sessionStart`` hook in ``.cursor/hooks.json``, VS Code's ``SessionStart`` hook file in
    ``.github/hooks/``, naming every journal of its wrapped servers: added, or brought up to date once more servers
    are wrapped (any other client of this planner: nothing).

    Raises:
        ClientConfigError: the hooks file cannot be read, or is not of the shape the client reads.
    """
    if client.brief not in ("cursor-hooks", "vscode-hooks") or not journals:
        return
    hook = briefs.owned_changes(client.brief, briefs.Brief(project, launcher, briefs.unique(journals)))
    if hook:
        result.changes += hook
        result.brief = briefs.where(client.brief)


def _gemini_hook(client: clients.Client, document: Any, path: str, launcher: wrap.Launcher, result: Outcome) -> None:
    """Add the brief hook to Gemini's settings (the file of its servers) where missing, and say what the user must
    still do: Gemini runs a project's servers and hooks only in a folder the user trusts.

    Raises:
        ClientConfigError: the file's hooks are not of the shape Gemini reads.
    """
    if not wrap.has_brief_hook(document):
        problem = gemini.add_brief_hook(document, launcher.shell("brief", "--hook"))
        if problem is not None:
            raise ClientConfigError(path, problem)
        result.brief = briefs.where(client.brief or "gemini-settings")
    result.notes.append(gemini.TRUST_NOTE.format(project=os.path.dirname(os.path.dirname(path))))


def _ignore_checkpoint_file(project: str) -> Change | None:
    """The project's ``.gitignore`` with ``/.claude-checkpoint*`` appended, or None when a line has it already.

    Raises:
        ClientConfigError: the file cannot be read.
    """
    path = os.path.join(project, PROJECT_GITIGNORE)
    try:
        with open(path, "rb") as handle:
            raw: bytes | None = handle.read()
    except FileNotFoundError:
        raw = None
    except OSError as exc:
        raise ClientConfigError(path, f"cannot be read ({exc.strerror})") from exc
    lines = (raw or b"").decode("utf-8", "replace").splitlines()
    if any(line.strip() in (CHECKPOINT_IGNORED, CHECKPOINT_IGNORED[1:]) for line in lines):
        return None
    newline = b"\r\n" if raw and b"\r\n" in raw else b"\n"
    before = raw or b""
    if before and not before.endswith(b"\n"):
        before += newline
    return Change(path, raw, before + CHECKPOINT_IGNORE_TEXT.encode().replace(b"\n", newline))


def _own_policy(
    project: str,
    policies_folder: str,
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
    path = policies.policy_path(policies_folder, name, taken)
    if not os.path.exists(path):
        cwd = entry.get("cwd")
        folder = os.path.join(project, os.path.expanduser(cwd)) if isinstance(cwd, str) and cwd else project
        to_ask[name] = (policies.Server(name, shape, env, folder), path)
    return dataclasses.replace(wrapping, policy=path)


def _policy_changes(
    to_ask: Mapping[str, tuple[policies.Server, str]], tools_of: policies.ToolLister | None, result: Outcome
) -> list[Change]:
    """Each new policy file, written from what its server listed (all asked at once), or ``[default]`` alone."""
    listed = tools_of([server for server, _ in to_ask.values()]) if tools_of is not None and to_ask else {}
    changes = []
    for name, (server, path) in to_ask.items():
        listing = listed.get(name, "not asked")
        if isinstance(listing, str):
            result.unasked.append((name, listing, policies.suggest_command(server)))
            text = policies.unasked(name, listing)
        else:
            written = policies.written(name, listing)
            result.written.append(written)
            text = written.text
        result.policies.append(path)
        changes.append(Change(path, None, text.encode()))
    return changes


def _state_files(project: str) -> list[Change]:
    """The ``.gitignore`` of ``.checkpoint``, if missing."""
    changes = []
    if not os.path.exists(os.path.join(project, GITIGNORE)):
        changes.append(Change(os.path.join(project, GITIGNORE), None, GITIGNORE_TEXT.encode()))
    return changes
