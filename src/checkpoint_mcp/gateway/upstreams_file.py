"""`checkpoint serve --upstreams FILE.toml`: the upstreams one gateway puts behind one endpoint, read once at start.

The file has one table per upstream; its name is the prefix of the upstream's tools, prompts and resource
templates (``mail__send``)::

    [upstreams.mail]
    command = "node mailer.js"                  # a stdio server (run by /bin/sh -c), or:
    env = { SMTP_HOST = "smtp.internal" }       # added to the command's environment (command only)
    policy = "policies/mail.toml"               # its tool policy, relative to this file (optional)

    [upstreams.github]
    url = "https://api.example.com/mcp/"        # a remote server, with the flags of --upstream-url as keys:
    headers = ["X-Team: platform"]              # --upstream-header (${VAR} from the environment)
    header_env = { "X-Api-Key" = "GITHUB_KEY" } # --upstream-header-env
    bearer_env = "GITHUB_TOKEN"                 # --upstream-bearer-env
    auth = "oauth"                              # --upstream-auth
    timeout = 60                                # --upstream-timeout (seconds)
    ca = "certs/private-ca.pem"                 # --upstream-ca, relative to this file

Everything is checked here, once (habit 12): an unknown key, a wrong type, a name that cannot be a prefix, a
policy with a mistake: a ``UsageError`` naming the file, the table and the key.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from checkpoint_mcp.config import DEFAULT_UPSTREAM_TIMEOUT, RemoteConfig
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy import Policy, load_policy

SEPARATOR: Final = "__"
"""Between an upstream's name and its tool's (or prompt's, or resource template's) name: ``mail__send``."""
MAX_LISTED_NAME: Final = 64
"""The longest prefixed name: what most clients accept for a tool's name."""
NAME: Final = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
"""An upstream's name: letters and digits, single ``-`` or ``_`` between them, so ``__`` can only be the
separator and the first ``__`` of a listed name always ends its prefix."""

_COMMON_KEYS = frozenset({"command", "url", "policy"})
_COMMAND_KEYS = frozenset({"env"})
_URL_KEYS = frozenset({"headers", "header_env", "bearer_env", "auth", "timeout", "ca"})


@dataclass(frozen=True)
class UpstreamSpec:
    """One upstream of the file: how to start or reach it, and its tool policy."""

    name: str
    command: str | None = None
    remote: RemoteConfig | None = None
    env: tuple[tuple[str, str], ...] = ()  # (variable, value) added to the command's environment
    policy: Policy | None = None

    @property
    def where(self) -> str:
        """What it is, for messages (never a header value)."""
        return (
            f"command {self.command!r}" if self.command is not None else f"url {self.remote.url if self.remote else ''}"
        )


def prefixed(upstream: str, name: str) -> str:
    """The name a client sees for ``name`` of ``upstream``."""
    return f"{upstream}{SEPARATOR}{name}"


def split_name(listed: str) -> tuple[str, str] | None:
    """``(upstream, name)`` of a prefixed name, or None if it has no prefix."""
    upstream, separator, name = listed.partition(SEPARATOR)
    return (upstream, name) if separator and upstream and name else None


def load_upstreams(path: str) -> tuple[UpstreamSpec, ...]:
    """Read and check the upstreams file at ``path`` (its policies too).

    Raises:
        UsageError: the file cannot be read, is not TOML, has no upstream, or any table, key, type or value is
            wrong; the message names the file, the table and the key.
    """
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read the upstreams file {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not a valid TOML file: {exc}") from exc
    for key in document:
        if key != "upstreams":
            raise UsageError(f"{path}: unknown top-level key {key!r}: the file has only [upstreams.NAME] tables")
    tables = document.get("upstreams")
    if not isinstance(tables, dict) or not tables:
        raise UsageError(f"{path}: no upstream: add a table [upstreams.NAME] with command = … or url = …")
    folder = Path(path).resolve().parent
    return tuple(_spec(path, folder, name, table) for name, table in tables.items())


def _checked_name(where: str, name: str) -> None:
    if not NAME.fullmatch(name):
        raise UsageError(
            f"{where}: the name must be letters and digits with single '-' or '_' between them (it prefixes "
            f"its tools as {name}{SEPARATOR}TOOL, and '{SEPARATOR}' is the separator)"
        )
    if len(name) + len(SEPARATOR) >= MAX_LISTED_NAME:
        raise UsageError(f"{where}: the name is too long to prefix a tool within {MAX_LISTED_NAME} characters")


def _spec(path: str, folder: Path, name: str, table: Any) -> UpstreamSpec:
    where = f"{path}: [upstreams.{name}]"
    _checked_name(where, name)
    if not isinstance(table, dict):
        raise UsageError(f"{where}: must be a table")
    for key in table:
        if key not in _COMMON_KEYS | _COMMAND_KEYS | _URL_KEYS:
            raise UsageError(f"{where}: unknown key {key!r}")
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise UsageError(f"{where}: give exactly one of command and url")
    policy = _policy(where, folder, table.get("policy"))
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise UsageError(f"{where} command: must be a non-empty string (a shell command)")
        for key in _URL_KEYS:
            if key in table:
                raise UsageError(f"{where} {key}: applies to url only")
        if policy is not None and policy.header_tools():
            tools = ", ".join(policy.header_tools())
            raise UsageError(f"{where} policy: {tools} put the idempotency key in an HTTP header, which needs a url")
        return UpstreamSpec(name, command=command, env=_env(where, table.get("env", {})), policy=policy)
    if "env" in table:
        raise UsageError(f"{where} env: applies to command only")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise UsageError(f"{where} url: must be an http(s) URL")
    remote = RemoteConfig(
        url=url,
        headers=tuple(_strings(where, "headers", table.get("headers", []))),
        timeout=_timeout(where, table.get("timeout", DEFAULT_UPSTREAM_TIMEOUT)),
        ca_file=_relative_file(where, "ca", folder, table.get("ca")),
        auth=_auth(where, table.get("auth")),
        header_envs=tuple(f"{k}={v}" for k, v in _env(where, table.get("header_env", {}), "header_env")),
        bearer_env=_optional_string(where, "bearer_env", table.get("bearer_env")),
    )
    return UpstreamSpec(name, remote=remote, policy=policy)


def _policy(where: str, folder: Path, value: Any) -> Policy | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} policy: must be a path (relative to the upstreams file)")
    return load_policy(folder / value)


def _env(where: str, value: Any, key: str = "env") -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise UsageError(f'{where} {key}: must be a table of NAME = "value"')
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        if not isinstance(item, str):
            raise UsageError(f"{where} {key}.{name}: must be a string")
        if not name or "=" in name:
            raise UsageError(f"{where} {key}: {name!r} cannot be a variable or header name")
        pairs.append((name, item))
    return tuple(pairs)


def _strings(where: str, key: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{where} {key}: must be a list of strings")
    return list(value)


def _optional_string(where: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise UsageError(f"{where} {key}: must be a non-empty string")
    return value


def _timeout(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise UsageError(f"{where} timeout: must be a number of seconds above 0")
    return float(value)


def _auth(where: str, value: Any) -> Any:
    if value is not None and value != "oauth":
        raise UsageError(f'{where} auth: the only value is "oauth"')
    return value


def _relative_file(where: str, key: str, folder: Path, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} {key}: must be a path (relative to the upstreams file)")
    resolved = folder / value
    if not os.path.isfile(resolved):
        raise UsageError(f"{where} {key}: {resolved} is not a file")
    return str(resolved)
