"""The flags that say which upstream to talk to, shared by every command that fronts one.

``upstream_options`` adds them to a click command; ``upstream_choice`` checks that exactly one way out was
given and builds its settings. ``checkpoint`` (the stdio proxy) uses both, and so can a gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from checkpoint_mcp.config import DEFAULT_UPSTREAM_TIMEOUT, RemoteConfig

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = [
    click.option(
        "--upstream-cmd",
        metavar="CMD",
        help="Shell command that starts the upstream MCP server (run by /bin/sh -c, on Windows by cmd.exe /c; "
        "inherits the environment).",
    ),
    click.option(
        "--upstream-url",
        metavar="URL",
        help="URL of a remote upstream MCP server (Streamable HTTP, or HTTP+SSE): instead of --upstream-cmd.",
    ),
    click.option(
        "--upstream-header",
        "upstream_headers",
        metavar="'NAME: VALUE'",
        multiple=True,
        help="HTTP header for every request to --upstream-url (repeatable); ${VAR} is taken from the environment.",
    ),
    click.option(
        "--upstream-header-env",
        "upstream_header_envs",
        metavar="NAME=VAR",
        multiple=True,
        help="HTTP header for every request to --upstream-url whose value is the environment variable VAR "
        "(repeatable; read at start, an unset or empty VAR is an error).",
    ),
    click.option(
        "--upstream-bearer-env",
        metavar="VAR",
        help="For --upstream-url: send 'Authorization: Bearer <VAR's value>' with every request (read at start, an "
        "unset or empty VAR is an error).",
    ),
    click.option(
        "--upstream-auth",
        type=click.Choice(["oauth"]),
        help="For --upstream-url: authorize with OAuth 2.1 (the URL to open is printed on stderr; tokens are kept).",
    ),
    click.option(
        "--upstream-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=DEFAULT_UPSTREAM_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="For --upstream-url: seconds to connect, and for a response to start.",
    ),
    click.option(
        "--upstream-ca",
        type=click.Path(exists=True, dir_okay=False),
        metavar="FILE",
        help="For --upstream-url: PEM file of the CA that signed the server's certificate (a private CA).",
    ),
]

_REMOTE_ONLY = ("upstream_headers", "upstream_header_envs", "upstream_bearer_env", "upstream_ca", "upstream_auth")


def upstream_options(function: F) -> F:
    """Add the upstream flags to a click command (they arrive as keyword arguments)."""
    for option in reversed(_OPTIONS):
        function = option(function)
    return function


def upstream_choice(options: dict[str, Any]) -> tuple[str | None, RemoteConfig | None]:
    """The command line's upstream: a shell command, or a remote server's settings.

    Raises:
        click.UsageError: neither or both of --upstream-cmd and --upstream-url, or a remote-only flag without
            --upstream-url.
    """
    command, url = options.get("upstream_cmd"), options.get("upstream_url")
    if command and url:
        raise click.UsageError("give either --upstream-cmd or --upstream-url, not both")
    if not command and not url:
        raise click.UsageError("--upstream-cmd or --upstream-url is required to run the proxy (see --help)")
    if command:
        given = [name for name in _REMOTE_ONLY if options.get(name)]
        if given:
            flag = "--" + given[0].replace("_", "-").removesuffix("s")
            raise click.UsageError(f"{flag} applies to --upstream-url only")
        return command, None
    assert url is not None
    remote = RemoteConfig(
        url=url,
        headers=tuple(options.get("upstream_headers") or ()),
        timeout=float(options.get("upstream_timeout") or DEFAULT_UPSTREAM_TIMEOUT),
        ca_file=options.get("upstream_ca"),
        auth=options.get("upstream_auth"),
        header_envs=tuple(options.get("upstream_header_envs") or ()),
        bearer_env=options.get("upstream_bearer_env"),
    )
    return None, remote
