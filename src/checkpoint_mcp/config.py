"""The plain settings every room reads: how to reach a remote upstream, its headers, the audit key.

Nothing here imports a room: the transports read this module, and a transport decides nothing, so the settings
that carry a decision (the tool policies) live with the interceptor, in ``intercept/proxy_config.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

from checkpoint_mcp.errors import UsageError

DEFAULT_UPSTREAM_TIMEOUT = 60.0  # seconds to connect, and for a response to start


class RemoteConfig(NamedTuple):
    """How to reach a remote upstream (`--upstream-url` and its flags)."""

    url: str
    headers: tuple[str, ...] = ()  # "Name: value" as given; ``${VAR}`` is expanded from the environment at start
    timeout: float = DEFAULT_UPSTREAM_TIMEOUT
    ca_file: str | None = None
    auth: Literal["oauth"] | None = None
    header_envs: tuple[str, ...] = ()  # "Name=VAR" as given (--upstream-header-env): VAR's value, read at start
    bearer_env: str | None = None  # VAR (--upstream-bearer-env): "Authorization: Bearer <VAR's value>", read at start


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_headers(templates: tuple[str, ...], environ: Mapping[str, str]) -> dict[str, str]:
    """The ``--upstream-header`` values, with ``${VAR}`` taken from ``environ``.

    Errors name the header and the variable, never a value (it may hold a secret).

    Raises:
        UsageError: a header is not ``Name: value``, or names an unset variable.
    """
    headers: dict[str, str] = {}
    for template in templates:
        name, colon, value = template.partition(":")
        name = name.strip()
        if not colon or not _TOKEN.fullmatch(name):
            raise UsageError(f"--upstream-header must look like 'Name: value' (header {name[:40]!r})")

        def substitute(match: re.Match[str], header: str = name) -> str:
            variable = match.group(1)
            if variable not in environ:
                raise UsageError(f"--upstream-header {header}: the environment variable {variable} is not set")
            return environ[variable]

        expanded = _VARIABLE.sub(substitute, value.strip())
        if "\r" in expanded or "\n" in expanded:
            raise UsageError(f"--upstream-header {name}: the value holds a line break")
        headers[name] = expanded
    return headers


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_headers(specs: tuple[str, ...], environ: Mapping[str, str]) -> dict[str, str]:
    """The ``--upstream-header-env Name=VAR`` headers: each one's value is VAR's, taken as it is.

    The value never passes through a command line (where a client such as Claude Code would try to expand a
    ``${VAR}`` from its own environment); errors name the header and the variable, never a value.

    Raises:
        UsageError: a spec is not ``Name=VAR``, or VAR is unset or empty, or its value holds a line break.
    """
    headers: dict[str, str] = {}
    for spec in specs:
        name, equals, variable = (part.strip() for part in spec.partition("="))
        if not equals or not _TOKEN.fullmatch(name) or not _ENV_NAME.fullmatch(variable):
            raise UsageError(f"--upstream-header-env must look like 'Name=VARIABLE', not {spec[:60]!r}")
        value = environ.get(variable, "")
        if not value:
            raise UsageError(
                f"--upstream-header-env {name}={variable}: the environment variable {variable} is empty or unset"
            )
        if "\r" in value or "\n" in value:
            raise UsageError(f"--upstream-header-env {name}={variable}: the value holds a line break")
        headers[name] = value
    return headers


def bearer_header(variable: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The ``--upstream-bearer-env VAR`` header: ``Authorization: Bearer <VAR's value>`` (none without the flag).

    A client such as Codex names the variable that holds a bearer token (``bearer_token_env_var``), not the
    header, so the ``Bearer`` prefix is the proxy's to add. Errors name the variable, never its value.

    Raises:
        UsageError: VAR is not a variable name, is unset or empty, or its value holds a line break.
    """
    if variable is None:
        return {}
    if not _ENV_NAME.fullmatch(variable):
        raise UsageError(f"--upstream-bearer-env must name an environment variable, not {variable[:60]!r}")
    value = environ.get(variable, "")
    if not value:
        raise UsageError(f"--upstream-bearer-env {variable}: the environment variable is empty or unset")
    if "\r" in value or "\n" in value:
        raise UsageError(f"--upstream-bearer-env {variable}: the value holds a line break")
    return {"Authorization": f"Bearer {value}"}


def audit_key(variable: str | None, environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key ``--audit-key-env VAR`` names (its UTF-8 bytes), or None without the flag.

    Raises:
        UsageError: the variable is unset or empty (its value is never shown).
    """
    if variable is None:
        return None
    value = (os.environ if environ is None else environ).get(variable, "")
    if not value:
        raise UsageError(f"--audit-key-env {variable}: the environment variable {variable} is empty or unset")
    return value.encode()
