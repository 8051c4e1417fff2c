"""One server entry rewritten to run through ``checkpoint``; the session server and the SessionStart hook.

A stdio entry's ``command`` and ``args`` become one ``--upstream-cmd`` string that the platform's shell turns back
into exactly that argv (``/bin/sh -c`` with ``shlex`` quoting; on Windows ``cmd.exe /c`` with ``mslex`` quoting, so
an entry that is itself ``cmd /c npx …`` keeps working: ``platforms.commands``). A macOS app started by launchd
(Claude Desktop) searches only ``/usr/bin:/bin:/usr/sbin:/sbin``: for it a bare command found on the user's PATH
at `init` is written as its absolute path, as ``checkpoint`` itself always is. Two things never move into an
argument:

- the entry's ``env`` stays its ``env`` (the proxy's child inherits it);
- a string holding a client variable (``${VAR}``, ``${env:VAR}``, ``${input:ID}``: the client expands these in
  ``args`` before it starts the server, and a secret would then sit in the proxy's command line, readable by
  every user in ``ps``) moves into ``env`` as ``CHECKPOINT_ARG_<n>``, where the client expands it as before, and
  the shell command says ``"$CHECKPOINT_ARG_<n>"`` (``"%CHECKPOINT_ARG_<n>%"`` for ``cmd.exe``): the upstream
  still gets that argument.

An HTTP entry becomes ``--upstream-url URL`` and one ``--upstream-header-env Name=CHECKPOINT_HEADER_<NAME>`` per
header, its value (as written, a ``${VAR}`` still a reference the client expands) in ``env`` as
``CHECKPOINT_HEADER_<NAME>``: the proxy reads the variable at start, so no header value is ever an argument, and
no ``${…}`` is left in ``args`` for the client to expand from its own environment (Claude Code warns about each
one it cannot). An entry an older `init` wrote with ``--upstream-header 'Name: ${CHECKPOINT_HEADER_<NAME>}'``
still works; ``upgrade_headers`` rewrites it to the new form.

Every other field of the entry is kept where it was.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.init.clients import HttpEntry, StdioEntry
from checkpoint_mcp.journal import without_password
from checkpoint_mcp.platforms import commands
from checkpoint_mcp.platforms.host import HOST

CLIENT_VARIABLE: Final = "${"
SESSION_NAME: Final = "checkpoint-session"
HOOK_SOURCES: Final = ("startup", "resume", "clear", "compact")
"""Every way Claude Code starts a session (``resume``: ``--continue``/``--resume``): each one gets the brief."""
HOOK_MATCHER: Final = "|".join(HOOK_SOURCES)
HOOK_TIMEOUT: Final = 10
HEADER_ENV_FLAG: Final = "--upstream-header-env"
_NOT_NAME: Final = re.compile(r"[^A-Z0-9]+")
_OLD_HEADER: Final = re.compile(r"(?P<header>[^:\s]+): \$\{(?P<variable>CHECKPOINT_HEADER_[A-Z0-9_]+)\}")
LAUNCHD_PATH: Final = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
"""Where a macOS app that launchd started finds a bare command."""


@dataclass(frozen=True)
class Launcher:
    """How a client starts this ``checkpoint``: an absolute ``command`` and the ``args`` that come first."""

    command: str
    prefix: tuple[str, ...] = ()
    which: Callable[[str], str | None] | None = None
    """For a client that does not search the user's PATH (a macOS app started by launchd): the user's PATH lookup
    that makes a wrapped server's bare command absolute. None: commands are written as they are."""

    def shell(self, *args: str) -> str:
        """The same, as one shell command line (for a hook)."""
        return shlex.join([self.command, *self.prefix, *args])


def launcher(argv0: str, python: str, which: Any = None) -> Launcher:
    """The ``checkpoint`` that is running now, by absolute path: the console script when ``argv0`` is one, else
    ``python -m checkpoint_mcp`` with this interpreter (``python``, absolute).

    ``which`` (``shutil.which``) finds a bare ``checkpoint`` on the PATH.
    """
    base = os.path.basename(argv0)
    if base in ("checkpoint", "checkpoint.exe"):
        found = argv0 if os.sep in argv0 else (which(argv0) if which is not None else None)
        if found and os.access(found, os.X_OK):
            return Launcher(os.path.abspath(found))
    return Launcher(os.path.abspath(python), ("-m", "checkpoint_mcp"))


def for_launchd(launcher: Launcher, which: Callable[[str], str | None]) -> Launcher:
    """``launcher`` for a macOS app that launchd starts: the bare commands it wraps become absolute (``which``)."""
    return Launcher(launcher.command, launcher.prefix, which)


def absolute_command(command: str, which: Callable[[str], str | None] | None) -> str:
    """``command`` as a launchd-started app finds it: a bare name found on the user's PATH outside
    ``LAUNCHD_PATH`` becomes its absolute path; anything else is kept as written."""
    if which is None or os.sep in command or CLIENT_VARIABLE in command:
        return command
    found = which(command)
    if not found or os.path.dirname(found) in LAUNCHD_PATH:
        return command
    return found


def runs_checkpoint(entry: Mapping[str, Any]) -> bool:
    """Whether an entry already starts ``checkpoint`` (its console script, or ``python -m checkpoint_mcp``)."""
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str):
        return False
    base = os.path.basename(command)
    if base in ("checkpoint", "checkpoint.exe"):
        return True
    return base.startswith("python") and isinstance(args, list) and args[:2] == ["-m", "checkpoint_mcp"]


def is_session_server(entry: Mapping[str, Any]) -> bool:
    """Whether an entry runs ``checkpoint session`` (not a proxy whose ``--workflow-id`` is ``session``)."""
    args = entry.get("args", [])
    if not runs_checkpoint(entry) or not isinstance(args, list):
        return False
    return any(a == "session" and (i == 0 or not str(args[i - 1]).startswith("-")) for i, a in enumerate(args))


@dataclass(frozen=True)
class Wrapping:
    """What every wrapped entry gets: the launcher, the journal, and the policy file, if any."""

    launcher: Launcher
    journal: str
    policy: str | None = None

    def proxy_args(self, workflow: str) -> list[str]:
        args = [*self.launcher.prefix, *journal_args(self.journal, workflow)]
        if self.policy is not None:
            args += ["--policy", self.policy]
        # The serverInfo name the client sees is the entry's own, not "checkpoint" for every wrapped server.
        return [*args, "--name", workflow]


def journal_args(location: str, workflow: str) -> list[str]:
    """``--journal J --workflow-id W``: the one place a journal becomes text in a file `init` writes, so a
    PostgreSQL URL is written without its password (``journal.without_password``)."""
    return ["--journal", without_password(location), "--workflow-id", workflow]


def holds_client_variable(word: str) -> bool:
    """Whether ``word`` holds a ``${…}`` the client expands (every client but Gemini, which also has ``$VAR``)."""
    return CLIENT_VARIABLE in word


def wrap(
    name: str,
    entry: Mapping[str, Any],
    shape: StdioEntry | HttpEntry,
    wrapping: Wrapping,
    holds_variable: Callable[[str], bool] = holds_client_variable,
) -> dict[str, Any]:
    """The entry that runs ``checkpoint`` in front of the server ``entry`` describes (a new dict; key order kept);
    an argument for which ``holds_variable`` is true moves into ``env``."""
    env = dict(entry.get("env", {}))
    if isinstance(shape, StdioEntry):
        command = absolute_command(shape.command, wrapping.launcher.which)
        upstream = ["--upstream-cmd", shell_command([command, *shape.args], env, holds_variable)]
    else:
        upstream = ["--upstream-url", shape.url]
        for header, value in shape.headers:
            variable = header_variable(header, env)
            env[variable] = value
            upstream += [HEADER_ENV_FLAG, f"{header}={variable}"]
    replaced = {"command": wrapping.launcher.command, "args": [*wrapping.proxy_args(name), *upstream]}
    result: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("command", "url"):
            result.update(replaced)
        elif key == "type":
            result[key] = "stdio"
        elif key == "env":
            result[key] = env
        elif key not in ("args", "headers"):
            result[key] = value
    if env and "env" not in result:
        result["env"] = env
    return result


def upgrade_headers(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The entry with every ``--upstream-header 'Name: ${CHECKPOINT_HEADER_<NAME>}'`` an older `init` wrote (its
    variable in the entry's ``env``) as ``--upstream-header-env Name=CHECKPOINT_HEADER_<NAME>``; None when it has
    none. Headers written by hand are left as they are."""
    args, env = entry.get("args"), entry.get("env")
    if not isinstance(args, list) or not isinstance(env, dict):
        return None
    new = list(args)
    for index in range(len(new) - 1):
        found = _OLD_HEADER.fullmatch(new[index + 1]) if isinstance(new[index + 1], str) else None
        if new[index] == "--upstream-header" and found and found["variable"] in env:
            new[index : index + 2] = [HEADER_ENV_FLAG, f"{found['header']}={found['variable']}"]
    return None if new == args else {**entry, "args": new}


def shell_command(
    argv: Sequence[str],
    env: dict[str, str],
    holds_variable: Callable[[str], bool] = holds_client_variable,
    windows: bool = HOST.windows_commands,
) -> str:
    """``argv`` as a command line for the platform's shell that runs exactly it (``windows``: for ``cmd.exe``);
    strings holding a client variable move into ``env`` (as ``CHECKPOINT_ARG_<n>``) and are written as
    ``"$CHECKPOINT_ARG_<n>"`` (``"%CHECKPOINT_ARG_<n>%"``)."""
    words = []
    for index, word in enumerate(argv):
        if holds_variable(word):
            variable = _free(f"CHECKPOINT_ARG_{index}", env)
            env[variable] = word
            words.append(f'"%{variable}%"' if windows else f'"${variable}"')
        else:
            words.append(commands.quote(word, windows))
    return " ".join(words)


def header_variable(header: str, env: Mapping[str, str]) -> str:
    """The variable a header's value goes in: ``CHECKPOINT_HEADER_<NAME>``, one ``env`` does not use yet."""
    return _free(f"CHECKPOINT_HEADER_{_NOT_NAME.sub('_', header.upper()).strip('_')}", env)


def free_variable(name: str, env: Mapping[str, str]) -> str:
    """``name``, or the first ``name_<n>`` that ``env`` does not use yet."""
    return _free(name, env)


def _free(name: str, env: Mapping[str, str]) -> str:
    candidate, n = name, 1
    while candidate in env:
        n += 1
        candidate = f"{name}_{n}"
    return candidate


def session_entry(
    wrapping: Wrapping, journals: Iterable[tuple[str, str]], project: str, *, finds_project: bool
) -> dict[str, Any]:
    """The ``checkpoint session`` server. A client that finds the project by itself (Claude Code sets
    ``CLAUDE_PROJECT_DIR``; the session reads the journals from ``.mcp.json``) gets the bare command; any other
    gets the journals (location, workflow) and ``CHECKPOINT_PROJECT_ROOT``."""
    args = [*wrapping.launcher.prefix, "session"]
    if finds_project:
        return {"command": wrapping.launcher.command, "args": args}
    for location, workflow in journals:
        args += journal_args(location, workflow)
    return {"command": wrapping.launcher.command, "args": args, "env": {"CHECKPOINT_PROJECT_ROOT": project}}


def with_journals(entry: Mapping[str, Any], journals: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """A session server entry with ``--journal``/``--workflow-id`` pairs for ``journals`` appended to its args
    (everything it had is kept)."""
    args = list(entry.get("args", []))
    for location, workflow in journals:
        args += journal_args(location, workflow)
    return {**entry, "args": args}


def free_server_name(servers: Mapping[str, Any]) -> str:
    """``checkpoint-session``, or the first ``checkpoint-session-<n>`` no server has."""
    return _free(SESSION_NAME, servers)


def brief_groups(settings: Mapping[str, Any]) -> list[tuple[Any, bool]]:
    """Every SessionStart group that runs ``checkpoint brief --hook``, each with whether ``init`` wrote it (the
    brief is its only hook)."""
    hooks = settings.get("hooks", {})
    groups = hooks.get("SessionStart", []) if isinstance(hooks, dict) else []
    found = []
    for group in groups if isinstance(groups, list) else []:
        inner = group.get("hooks", []) if isinstance(group, dict) else []
        briefs = [hook for hook in inner if _is_brief(hook)] if isinstance(inner, list) else []
        if briefs:
            found.append((group, len(inner) == 1))
    return found


def _is_brief(hook: Any) -> bool:
    command = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(command, str) and "brief" in command and "--hook" in command and "checkpoint" in command


def has_brief_hook(settings: Mapping[str, Any]) -> bool:
    """Whether Claude Code settings already run ``checkpoint brief --hook`` at SessionStart."""
    return bool(brief_groups(settings))


def repair_brief_matcher(settings: dict[str, Any]) -> bool:
    """Widen the matcher of the brief hook ``init`` wrote to every source in ``HOOK_SOURCES`` (an older ``init``
    left out ``resume``); a group holding the user's own hooks is left as it is. Returns whether anything changed.
    """
    changed = False
    for group, ours in brief_groups(settings):
        matcher = group.get("matcher")
        if not ours or not isinstance(matcher, str) or matcher in ("", "*"):
            continue  # not init's, or it already matches every source
        sources = matcher.split("|")
        missing = [source for source in HOOK_SOURCES if source not in sources]
        if missing:
            known = set(sources) <= set(HOOK_SOURCES)
            group["matcher"] = HOOK_MATCHER if known else "|".join([*sources, *missing])
            changed = True
    return changed


def session_start_groups(settings: dict[str, Any]) -> list[Any] | str:
    """The settings' ``hooks.SessionStart`` list of hook groups (made when missing), as Claude Code and Gemini CLI
    both write it, or what is wrong with its shape."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        return "'hooks' is not an object"
    groups = hooks.setdefault("SessionStart", [])
    if not isinstance(groups, list):
        return "'hooks.SessionStart' is not a list"
    return groups


def add_brief_hook(settings: dict[str, Any], command: str) -> str | None:
    """Append the SessionStart hook running ``command`` to Claude Code settings, keeping every hook there.

    Returns what is wrong with the settings' shape (None when the hook was added).
    """
    groups = session_start_groups(settings)
    if isinstance(groups, str):
        return groups
    groups.append(
        {"matcher": HOOK_MATCHER, "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]}
    )
    return None
