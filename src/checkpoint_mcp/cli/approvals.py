"""`checkpoint journal approvals` and `checkpoint journal approve`: the operator's side of approval gates.

A tool policy's ``approve = "operator"`` makes each call of that tool wait for a person's approval of its exact
arguments: the proxy refuses it at once, naming a request in the journal. These commands list those requests and
decide one. Thin click adapters like ``cli.operator``: open the journal, make one library call, print.

Nothing the agent sends approves a call; whoever can run `checkpoint journal approve` on the journal can. An
agent with a shell must therefore be denied this command (the README says how for Claude Code).
"""

from __future__ import annotations

import click

from checkpoint_mcp.cli.journal import emit_json, journal_option, json_option, opened


@click.command("approvals")
@journal_option
@json_option
@click.argument("workflow", required=False)
def journal_approvals(location: str, as_json: bool, workflow: str | None) -> None:
    """List approval requests (pending, granted, denied, used, expired), newest first.

    Those of WORKFLOW, or by default of every workflow. Each is pending (waiting for a person), granted (the
    same call, sent again before it expires, runs once), denied, used (by call #N) or expired (granted, not
    used in time). Decide one with `checkpoint journal approve`.
    """
    from checkpoint_mcp.clock import utc_now
    from checkpoint_mcp.journal import approval_report
    from checkpoint_mcp.journal.operations import approval_requests

    with opened(location) as journal:
        found = approval_requests(journal, workflow)
    now = utc_now()
    if as_json:
        emit_json([approval_report.approval_json(a, now) for a in found])
    else:
        click.echo(approval_report.render_approvals(found, now))


@click.command("approve")
@journal_option
@click.argument("approval_id", metavar="ID", type=click.IntRange(min=1))
@click.option("--deny", is_flag=True, help="Deny the call instead: sent again, it is refused and never runs.")
@click.option("--reason", metavar="TEXT", help="Why: recorded with the decision, and shown to the agent on a denial.")
def journal_approve(location: str, approval_id: int, deny: bool, reason: str | None) -> None:
    """Approve, or deny with --deny, one pending approval request.

    ID is the request's number, as the refusal and `checkpoint journal approvals` show it. An approval covers
    exactly the call the request names (its workflow, tool and arguments), once: that call, sent again by the
    agent before the approval expires (the tool policy's approval_expires, 1h by default), runs; a second one
    needs a new approval. The decision is recorded as this OS user on this host, in the
    journal's hash chain. Refused for an unknown request or one already decided, used or expired.
    """
    from checkpoint_mcp.journal import approval_report, operations

    with opened(location) as journal:
        decided = operations.decide_approval(journal, approval_id, not deny, reason)
    click.echo(approval_report.decision_text(decided))
