"""`--policy FILE` for the commands that take one, `checkpoint policy check` and `policy suggest`: thin click
adapters.

The policy is read and checked here, at the edge, before any upstream starts; the library takes the frozen
``Policy`` (see ``intercept/policy.py``).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from checkpoint_mcp.errors import CheckpointError, UsageError
from checkpoint_mcp.upstream.options import upstream_choice, upstream_options

if TYPE_CHECKING:
    from checkpoint_mcp.config import RemoteConfig
    from checkpoint_mcp.intercept.policy import Policy


def policy_option(function: Any) -> Any:
    """Add ``--policy FILE`` to a click command (it arrives as the keyword argument ``policy``)."""
    return click.option(
        "--policy",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="Tool policies (TOML): repeats caught by their content, in-doubt calls settled by a probe or an "
        "idempotency key, tools left unjournaled. See docs/policies.md.",
    )(function)


def checked_policy(path: str | None, remote: RemoteConfig | None) -> Policy | None:
    """The policy at ``path`` (None: no policy), checked for the upstream the command talks to.

    Raises:
        click.UsageError: the file cannot be read or has a mistake (the message names file, table and key), or
            a tool's idempotency key goes in a header without --upstream-url.
    """
    if path is None:
        return None
    from checkpoint_mcp.intercept.policy import load_policy

    try:
        policy = load_policy(path)
        require_transport(policy, remote is not None)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from exc
    return policy


def require_transport(policy: Policy, remote: bool) -> None:
    """A key sent in an HTTP header needs an HTTP upstream.

    Raises:
        UsageError: a rule puts its idempotency key in a header, and the upstream is a child over stdio.
    """
    headers = policy.header_tools()
    if headers and not remote:
        raise UsageError(
            f"{policy.path}: [{headers[0]}] idempotency.header: a header reaches only an --upstream-url upstream; "
            'with --upstream-cmd put the key in an argument: idempotency = { argument = "NAME" }'
        )


@click.group("policy")
def policy_group() -> None:
    """Check a tool policy file (see docs/policies.md)."""


@policy_group.command("check")
@click.argument("file", type=click.Path(dir_okay=False))
@upstream_options
@click.option("--trust-annotations", is_flag=True, help="As the proxy's flag: readOnlyHint tools are not journaled.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")
def policy_check(file: str, trust_annotations: bool, as_json: bool, **options: Any) -> None:
    """Check FILE and print the effective rule of every tool.

    The tools are the upstream's: ask it with --upstream-cmd or --upstream-url, or give its tools/list result
    (the response, its result, or the tools array) as JSON on stdin. A mistake in the file, or a probe whose tool
    is not read-only, is an error (exit 1); a rule naming a tool the upstream does not list is a warning.
    """
    from checkpoint_mcp.intercept.policy import load_policy
    from checkpoint_mcp.intercept.policy.report import effective_rules, render_rules, tools_from_json

    asks = bool(options.get("upstream_cmd") or options.get("upstream_url"))
    try:
        policy = load_policy(file)
        if asks:
            upstream_cmd, remote = upstream_choice(options)
            require_transport(policy, remote is not None)
            from checkpoint_mcp.upstream.client import fetch_tools

            tools = fetch_tools(upstream_cmd, remote, options["upstream_timeout"])
        else:
            if sys.stdin.isatty():
                click.echo("reading a tools/list result from stdin (or give --upstream-cmd/--upstream-url)", err=True)
            tools = tools_from_json(sys.stdin.read())
        warnings = policy.check_tools(tools)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    rows = effective_rules(policy, tools, trust_annotations)
    if as_json:
        click.echo(json.dumps({"policy": policy.path, "tools": rows, "warnings": warnings}, indent=2))
    else:
        click.echo(render_rules(rows))


@policy_group.command("suggest")
@upstream_options
@click.option("--name", default="server", show_default=True, help="The server's name, for the file's header.")
def policy_suggest(name: str, **options: Any) -> None:
    """Print a policy for one server, written from its tools as `checkpoint init` writes them.

    Asks the server (--upstream-cmd or --upstream-url) for its tools/list and prints one commented table per
    tool: from the reviewed profile of a well-known server, else readOnlyHint gives journal = false,
    idempotentHint idempotent = true, openWorldHint false repeats that run, no hints and a name that reads
    journal = false, anything else a repeat from a later session refused within 24h. Save it and give it to the
    server's proxy with --policy.
    """
    from checkpoint_mcp.init.policies import suggest
    from checkpoint_mcp.upstream.client import fetch_server_and_tools

    upstream_cmd, remote = upstream_choice(options)
    try:
        server_info, tools = fetch_server_and_tools(upstream_cmd, remote, options["upstream_timeout"])
        text = suggest(name, tools, server_info)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(text, nl=False)
