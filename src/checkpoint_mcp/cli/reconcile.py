"""`checkpoint journal reconcile`: a thin click adapter over ``proxy/reconcile.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from checkpoint_mcp.cli.policy import checked_policy
from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.upstream.options import upstream_choice, upstream_options


@click.command("reconcile")
@click.option("--journal", "location", required=True, metavar="PATH_OR_URL", help="The journal, as the proxy's.")
@click.argument("workflow", required=False)
@upstream_options
@click.option("--policy", required=True, metavar="FILE", type=click.Path(dir_okay=False), help="The tool policies.")
@click.option("--dry-run", is_flag=True, help="Ask the probes, but write nothing and send nothing again.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of lines.")
def journal_reconcile(
    location: str, workflow: str | None, policy: str, dry_run: bool, as_json: bool, **options: Any
) -> None:
    """Settle the in-doubt calls of WORKFLOW by the policy's probes and idempotency keys; print each decision.

    The upstream is the proxy's (--upstream-cmd or --upstream-url, with their flags). A call whose probe proves it
    ran becomes COMPLETED (with the evidence); one the probe proves did not run is released; a tool with an
    idempotency key (in an argument or a header) is sent again under the same key. Anything else stays in doubt.
    Refused while a live proxy owns the workflow. WORKFLOW defaults to the proxy's default workflow for this journal.
    """
    from checkpoint_mcp.journal import default_workflow_id, open_journal
    from checkpoint_mcp.proxy.reconcile import reconcile, render
    from checkpoint_mcp.upstream.client import open_upstream

    upstream_cmd, remote = upstream_choice(options)
    rules = checked_policy(policy, remote)
    assert rules is not None
    chosen = workflow if workflow is not None else default_workflow_id(location)
    try:
        journal = open_journal(location, create=False)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        upstream = open_upstream(upstream_cmd, remote)
        decisions = asyncio.run(
            reconcile(journal, chosen, rules, upstream, options["upstream_timeout"], dry_run=dry_run)
        )
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        journal.close()
    if as_json:
        click.echo(json.dumps([d.as_json() for d in decisions], indent=2, ensure_ascii=False))
    else:
        click.echo(render(decisions, dry_run))


def settle_options(function: Any) -> Any:
    """``--policy`` and the upstream flags, for the pages' settle action (`checkpoint journal ui`)."""
    function = click.option(
        "--policy",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="With the upstream flags: an in-doubt call's page can settle it by the policy's probe or key.",
    )(function)
    return upstream_options(function)


def settle_action_from(location: str, audit_key: bytes | None, options: dict[str, Any]) -> Any:
    """The pages' settle action from ``settle_options`` (None without ``--policy``).

    Raises:
        click.UsageError: ``--policy`` without an upstream, or a bad policy file.
    """
    if options.get("policy") is None:
        return None
    from checkpoint_mcp.proxy.reconcile import settle_action

    upstream_cmd, remote = upstream_choice(options)
    rules = checked_policy(options["policy"], remote)
    assert rules is not None
    return settle_action(location, rules, upstream_cmd, remote, options["upstream_timeout"], audit_key)
