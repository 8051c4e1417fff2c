"""OpenAI Codex CLI's ``config.toml``: its MCP servers wrapped, the session server and the SessionStart hook added.

Codex keeps its servers as ``[mcp_servers.NAME]`` tables in two files (``--scope``, both by default):

- **project**: ``<project>/.codex/config.toml``, which Codex reads only for a project the user's file marks
  ``[projects."<abs>"] trust_level = "trusted"`` (`init` says whether it is; it never marks trust itself). The
  session server and the SessionStart hook go here (the file is created when missing): they need the project.
- **user**: ``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``), started in every project, so each server gets
  its own journal under the user's data folder, as Claude Code's user scope does (``claude_json.user_journal``).

A stdio table keeps ``env``, ``env_vars`` and ``cwd`` (the proxy starts the server in that folder, with that
environment); ``command`` and ``args`` become the proxy's. An HTTP table (``url``) becomes a stdio one running the
proxy: Codex gives a stdio server only a dozen variables plus its ``env`` and the names in ``env_vars``, so
``bearer_token_env_var`` goes into ``env_vars`` and becomes ``--upstream-bearer-env``, each ``env_http_headers``
variable into ``env_vars`` and ``--upstream-header-env``, and each static ``http_headers`` value into ``env`` (as
``CHECKPOINT_HEADER_<NAME>``): no header value is ever an argument. Every other key (``startup_timeout_sec``,
``tool_timeout_sec``, ``enabled``, …) is kept, as are the file's comments and layout (``tomlkit``).

The session server and the hook (a ``[[hooks.SessionStart]]`` group running ``checkpoint brief --hook
--project-root <project>``) name no journal: they read them from the project's file, as they read Claude Code's
``.mcp.json``. Codex's SessionStart hook reads the same ``hookSpecificOutput.additionalContext`` JSON as Claude
Code's, and runs a hook only once the user has trusted it (its ``/hooks`` view), by its exact definition: so the
command stays the same however many servers a later `init` wraps.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

import tomlkit
import tomlkit.exceptions
from tomlkit.items import AoT, Table

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.init import briefs, claude_json, clients, scopes, wrap
from checkpoint_mcp.init.files import Change
from checkpoint_mcp.init.outcome import Outcome

PROJECT: Final = scopes.PROJECT
USER: Final = scopes.USER
HOME_ENV: Final = "CODEX_HOME"
SESSION_STARTUP_TIMEOUT: Final = 30
"""Seconds Codex may wait for the session server to start (it takes about a second and a half; Codex's default
of 10 leaves room, this leaves more on a loaded machine)."""
SESSION_REQUIRED: Final = True
"""Codex starts the first turn without waiting for a server that is not ``required`` (measured with 0.171.0: a
server that takes 3 s to start is missing from the first request's tools, and one marked ``required`` is there,
the first request 3 s later); the session server's tools and its brief matter most on the first turn, so Codex
waits for it. The price: if ``checkpoint session`` cannot start, Codex says so and does not start."""
_HTTP_KEYS: Final = ("url", "bearer_token_env_var", "bearer_token", "http_headers", "env_http_headers")


def project_path(project: str) -> str:
    """The project's ``.codex/config.toml``."""
    return os.path.join(project, ".codex", "config.toml")


def user_path(environ: Mapping[str, str]) -> str:
    """The user's ``config.toml``: ``$CODEX_HOME/config.toml``, else ``~/.codex/config.toml``."""
    folder = environ.get(HOME_ENV) or os.path.join(claude_json.home(environ), ".codex")
    return os.path.join(folder, "config.toml")


@dataclass
class Loaded:
    """One ``config.toml`` as read (``raw`` None: absent) and its document, which `init` changes in place."""

    path: str
    raw: bytes | None
    document: tomlkit.TOMLDocument

    def servers(self) -> MutableMapping[str, Any]:
        """Its ``mcp_servers`` table (an empty one, not yet in the document, when absent).

        Raises:
            ClientConfigError: ``mcp_servers`` is not a table.
        """
        servers = self.document.get("mcp_servers")
        if servers is None:
            return tomlkit.table(is_super_table=True)
        if not isinstance(servers, MutableMapping):
            raise ClientConfigError(self.path, "'mcp_servers' is not a table of servers")
        return servers

    def change(self) -> Change | None:
        """The file's change, or None when the document says what the file does."""
        after = tomlkit.dumps(self.document).encode("utf-8")
        return None if after == (self.raw or b"") else Change(self.path, self.raw, after)


def load(path: str) -> Loaded:
    """Read and parse one ``config.toml``; a missing file is an empty document.

    Raises:
        ClientConfigError: it cannot be read, is not UTF-8, or is not valid TOML (with line and column).
    """
    try:
        with open(path, "rb") as handle:
            raw: bytes | None = handle.read()
    except FileNotFoundError:
        return Loaded(path, None, tomlkit.document())
    except OSError as exc:
        raise ClientConfigError(path, f"cannot be read ({exc.strerror})") from exc
    assert raw is not None
    try:
        return Loaded(path, raw, tomlkit.parse(raw.decode("utf-8")))
    except UnicodeDecodeError as exc:
        raise ClientConfigError(path, "is not UTF-8") from exc
    except tomlkit.exceptions.ParseError as exc:
        raise ClientConfigError(path, f"is not valid TOML ({exc})") from exc


def trusted(user: Loaded, project: str) -> bool:
    """Whether the user's file marks ``project`` trusted (Codex reads the project's file only then)."""
    projects = user.document.get("projects")
    entry = projects.get(project) if isinstance(projects, Mapping) else None
    return isinstance(entry, Mapping) and entry.get("trust_level") == "trusted"


def shape_of(
    name: str, entry: Mapping[str, Any], path: str
) -> tuple[clients.StdioEntry | clients.HttpEntry, dict[str, str]]:
    """One ``[mcp_servers.NAME]`` table read as stdio or HTTP, and its ``env`` (values as written).

    Raises:
        ClientConfigError: the table is of a shape `init` does not know; the message names the file, the entry
            and the key.
    """
    plain = entry.unwrap() if hasattr(entry, "unwrap") else dict(entry)
    for key in ("http_headers_helper", "oauth"):
        if key in plain:
            raise ClientConfigError(path, f"{key!r} cannot be carried over by the proxy; --skip it", entry=name)
    env = clients.check_env(name, plain, path)
    _names(name, plain, "env_vars", path)
    if "url" not in plain:
        return clients.classify(name, plain, path), env
    if "command" in plain:
        raise ClientConfigError(path, "has both 'command' and 'url'", entry=name)
    url = plain["url"]
    if not isinstance(url, str) or not url:
        raise ClientConfigError(path, "'url' is not a non-empty string", entry=name)
    headers: list[tuple[str, str]] = []
    for key, template in (("http_headers", "{}"), ("env_http_headers", "${{{}}}")):
        table = plain.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise ClientConfigError(path, f"{key!r} is not a table of strings", entry=name)
        headers += [(header, template.format(value)) for header, value in table.items()]
    bearer = plain.get("bearer_token_env_var")
    if bearer is not None:
        if not isinstance(bearer, str) or not bearer:
            raise ClientConfigError(path, "'bearer_token_env_var' is not a variable name", entry=name)
        headers.append(("Authorization", f"Bearer ${{{bearer}}}"))
    if "bearer_token" in plain:
        if not isinstance(plain["bearer_token"], str):
            raise ClientConfigError(path, "'bearer_token' is not a string", entry=name)
        headers.append(("Authorization", f"Bearer {plain['bearer_token']}"))
    if sum(header.lower() == "authorization" for header, _ in headers) > 1:
        # The proxy would stop at start; Codex itself sends one of them, and which is not ours to guess.
        raise ClientConfigError(path, "gives the Authorization header more than once", entry=name)
    return clients.HttpEntry(url, tuple(headers)), env


def wrap_entry(name: str, entry: MutableMapping[str, Any], wrapping: wrap.Wrapping) -> None:
    """Rewrite one ``[mcp_servers.NAME]`` table in place to run the proxy (``shape_of`` has checked it)."""
    plain = entry.unwrap() if hasattr(entry, "unwrap") else dict(entry)
    env: dict[str, str] = dict(plain.get("env", {}))
    env_vars: list[str] = list(plain.get("env_vars", []))
    if "url" not in plain:
        argv = [plain["command"], *plain.get("args", [])]
        upstream = ["--upstream-cmd", wrap.shell_command(argv, env)]
    else:
        upstream = ["--upstream-url", plain["url"]]
        for header, value in plain.get("http_headers", {}).items():
            variable = wrap.header_variable(header, env)
            env[variable] = value
            upstream += [wrap.HEADER_ENV_FLAG, f"{header}={variable}"]
        for header, variable in plain.get("env_http_headers", {}).items():
            env_vars += [] if variable in env_vars else [variable]
            upstream += [wrap.HEADER_ENV_FLAG, f"{header}={variable}"]
        bearer = plain.get("bearer_token_env_var")
        if "bearer_token" in plain:
            bearer = wrap.free_variable("CHECKPOINT_BEARER_TOKEN", env)
            env[bearer] = plain["bearer_token"]
        elif bearer is not None and bearer not in env_vars:
            env_vars.append(bearer)
        if bearer is not None:
            upstream += ["--upstream-bearer-env", bearer]
        for key in _HTTP_KEYS:
            entry.pop(key, None)
    entry["command"] = wrapping.launcher.command
    entry["args"] = [*wrapping.proxy_args(name), *upstream]
    _extend(entry, "env", env, tomlkit.inline_table)
    _extend(entry, "env_vars", env_vars, tomlkit.array)


def _extend(entry: MutableMapping[str, Any], key: str, value: dict[str, str] | list[str], empty: Any) -> None:
    """Give ``entry[key]`` what ``value`` adds to it, in place (an inline table stays inline, a comment stays);
    a new one is made inline, after the entry's other keys."""
    if not value:
        return
    current = entry.get(key)
    if current is None:
        current = empty()
        entry[key] = current
        current = entry[key]
    if isinstance(value, dict):
        for name, text in value.items():
            if name not in current:
                current[name] = text
    else:
        current.extend(v for v in value if v not in current)


def session_entry(wrapping: wrap.Wrapping, project: str) -> Table:
    """The ``checkpoint session`` table: the project root, time to start, and ``required`` (Codex waits for it
    before the first turn). It names no journal: the session reads them from this very file
    (``session.journals``), so it stays right as servers are wrapped later."""
    env = tomlkit.inline_table()
    env["CHECKPOINT_PROJECT_ROOT"] = project
    table = tomlkit.table()
    table.update({"command": wrapping.launcher.command, "args": [*wrapping.launcher.prefix, "session"], "env": env})
    table["startup_timeout_sec"] = SESSION_STARTUP_TIMEOUT
    table["required"] = SESSION_REQUIRED
    return table


def hook_command(wrapping: wrap.Wrapping, project: str) -> str:
    """The SessionStart hook's shell command: the brief of ``project``, whose journals it reads from the
    project's file. Codex trusts a hook by its exact definition, so this one never changes with the servers."""
    return wrapping.launcher.shell("brief", "--hook", "--project-root", project)


def add_hook(loaded: Loaded, command: str) -> bool:
    """Append a ``[[hooks.SessionStart]]`` group running ``command`` unless one runs ``checkpoint brief --hook``
    already; returns whether it was added.

    Raises:
        ClientConfigError: ``hooks`` or ``hooks.SessionStart`` is not of the shape Codex reads.
    """
    hooks = loaded.document.get("hooks")
    if hooks is None:
        hooks = tomlkit.table(is_super_table=True)
        loaded.document["hooks"] = hooks
    if not isinstance(hooks, MutableMapping):
        raise ClientConfigError(loaded.path, "'hooks' is not a table")
    if wrap.has_brief_hook({"hooks": hooks.unwrap() if hasattr(hooks, "unwrap") else hooks}):
        return False
    groups = hooks.get("SessionStart")
    if groups is None:
        groups = AoT([])
        hooks["SessionStart"] = groups
    if not isinstance(groups, (AoT, list)):
        raise ClientConfigError(loaded.path, "'hooks.SessionStart' is not an array of tables")
    group = tomlkit.table()
    group["matcher"] = wrap.HOOK_MATCHER
    handler = tomlkit.table()
    handler.update({"type": "command", "command": command, "timeout": wrap.HOOK_TIMEOUT})
    group["hooks"] = AoT([handler])
    groups.append(group)
    return True


def wrap_table(
    scope: str,
    loaded: Loaded,
    servers: MutableMapping[str, Any],
    wrapping_of: Callable[[str, Mapping[str, Any], Any, dict[str, str]], wrap.Wrapping],
    select: Callable[[str], str | None],
    outcome: Outcome,
) -> list[str]:
    """Wrap every server of one file's table that ``select`` lets through (it returns why not, or None);
    returns the names of the servers that run through the proxy now (the session server aside)."""
    proxied: list[str] = []
    for name in list(servers):
        entry = servers[name]
        why = select(name)
        if isinstance(entry, Mapping) and wrap.is_session_server(entry):
            continue
        if why is not None:
            outcome.left_alone.append((name, why))
        elif isinstance(entry, Mapping) and wrap.runs_checkpoint(entry):
            outcome.left_alone.append((name, "already runs checkpoint"))
            proxied.append(name)
        else:
            if not isinstance(entry, MutableMapping):
                raise ClientConfigError(loaded.path, "the entry is not a table", entry=name)
            shape, env = shape_of(name, entry, loaded.path)
            wrapping = wrapping_of(name, entry, shape, env)
            wrap_entry(name, entry, wrapping)
            outcome.wrapped.append(scopes.Wrapped(scope, name, wrapping.journal, loaded.path))
            proxied.append(name)
    return proxied


def _names(name: str, entry: Mapping[str, Any], key: str, path: str) -> None:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ClientConfigError(path, f"{key!r} is not a list of variable names", entry=name)


def plan(asked: scopes.Asked, outcome: Outcome) -> None:
    """The changes to the project's and the user's ``config.toml``, in ``outcome``; nothing is written.

    Raises:
        ClientConfigError: a file cannot be read, or an entry is of a shape `init` does not know.
        InitError: --only or --skip names a server neither file has.
    """
    from checkpoint_mcp.errors import InitError

    own = load(project_path(asked.project))
    user = load(user_path(asked.environ))
    own_servers, user_servers = own.servers(), user.servers()
    known = {**user_servers, **own_servers}
    unknown = [name for name in (*asked.only, *asked.skip) if name not in known]
    if unknown:
        have = ", ".join(known) or "none"
        raise InitError(f"{own.path} and {user.path} have no server named {', '.join(map(repr, unknown))} ({have})")

    def select(scope: str) -> Callable[[str], str | None]:
        def why_not(name: str) -> str | None:
            if scope not in asked.scopes:
                return f"{scope} scope; not in --scope"
            if name in asked.skip or (asked.only and name not in asked.only):
                return "skipped"
            return None

        return why_not

    def wrapping_of(scope: str) -> Callable[[str, Mapping[str, Any], Any, dict[str, str]], wrap.Wrapping]:
        def of(name: str, entry: Mapping[str, Any], shape: Any, env: dict[str, str]) -> wrap.Wrapping:
            wrapping = asked.wrapping
            if scope == USER:
                journal = claude_json.user_journal(name, asked.environ)
                wrapping = wrap.Wrapping(wrapping.launcher, journal, wrapping.policy)
            if asked.policy_of is not None:
                wrapping = asked.policy_of(scope, name, entry, shape, env, wrapping)
            return wrapping

        return of

    proxied = wrap_table(PROJECT, own, own_servers, wrapping_of(PROJECT), select(PROJECT), outcome)
    wrap_table(USER, user, user_servers, wrapping_of(USER), select(USER), outcome)
    if PROJECT in asked.scopes:
        _session_and_hook(own, own_servers, proxied, asked, outcome)
    if own_servers and "mcp_servers" not in own.document:
        own.document["mcp_servers"] = own_servers
    if user_servers and "mcp_servers" not in user.document:
        user.document["mcp_servers"] = user_servers
    outcome.changes += [change for change in (own.change(), user.change()) if change is not None]
    if any(change.path == own.path for change in outcome.changes) and not trusted(user, asked.project):
        outcome.notes.append(
            f"Codex reads {own.path} only for a trusted project, and {user.path} does not mark "
            f"{asked.project} trusted: until you trust it (Codex asks when it first starts there), Codex starts "
            "none of that file's servers, the session server and the brief hook included"
        )
    if outcome.brief:
        outcome.notes.append(
            "Codex runs a new hook only once you trust it: open /hooks in Codex and trust `checkpoint brief "
            "--hook`; until then sessions start without the brief (the wrapped servers are protected all the same)"
        )
    if outcome.changes:
        outcome.notes.append("restart Codex for it to start the wrapped servers")


def _session_and_hook(
    own: Loaded, servers: MutableMapping[str, Any], proxied: list[str], asked: scopes.Asked, outcome: Outcome
) -> None:
    """Add the session server and the brief hook to the project's file, where missing (once a server there runs
    through the proxy)."""
    sessions = [n for n, e in servers.items() if isinstance(e, Mapping) and wrap.is_session_server(e)]
    outcome.left_alone += [(name, "already runs checkpoint") for name in sessions]
    if not proxied:
        return
    if not sessions:
        outcome.session = wrap.free_server_name(servers)
        servers[outcome.session] = session_entry(asked.wrapping, asked.project)
    if add_hook(own, hook_command(asked.wrapping, asked.project)):
        outcome.brief = briefs.where("codex-toml")
