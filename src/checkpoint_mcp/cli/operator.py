"""`checkpoint journal …`: the operator's commands (ls, show, resolve, export, gc, ui, reconcile, verify, approvals,
approve).

Thin click adapters like ``cli.main``: open the journal, make one library call, print.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import IO, TYPE_CHECKING, Any

import click

from checkpoint_mcp.cli.approvals import journal_approvals, journal_approve
from checkpoint_mcp.cli.journal import audit_key_option, emit_json, journal_option, journal_verify, json_option, opened
from checkpoint_mcp.cli.reconcile import journal_reconcile, settle_action_from, settle_options
from checkpoint_mcp.errors import CheckpointError

if TYPE_CHECKING:
    pass


@click.group("journal")
def journal_group() -> None:
    """Inspect and reconcile a journal: list workflows, show calls, resolve in-doubt calls, export, gc, web UI."""


journal_group.add_command(journal_reconcile)
journal_group.add_command(journal_approvals)
journal_group.add_command(journal_approve)


@journal_group.command("ls")
@journal_option
@json_option
def journal_ls(location: str, as_json: bool) -> None:
    """List workflows with their calls per state (in-doubt first), last activity and live owner."""
    from checkpoint_mcp.journal import report

    with opened(location) as journal:
        summaries = journal.workflows()
    if as_json:
        emit_json([report.summary_json(s) for s in summaries])
    else:
        click.echo(report.render_ls(summaries))


def _seq_type() -> click.IntRange:
    from checkpoint_mcp.journal.base import MAX_SEQ

    return click.IntRange(1, MAX_SEQ)  # what the journal's 64-bit columns can hold


def _workflow(location: str, workflow: str | None) -> str:
    """The WORKFLOW argument, by default the proxy's default for this journal (its path, or its URL)."""
    from checkpoint_mcp.journal import default_workflow_id

    return workflow if workflow is not None else default_workflow_id(location)


@journal_group.command("show")
@journal_option
@json_option
@click.argument("workflow", required=False)
@click.option("--seq", type=_seq_type(), help="Show this one call in full.")
def journal_show(location: str, as_json: bool, workflow: str | None, seq: int | None) -> None:
    """Show the timeline of WORKFLOW's calls, or one call in full with --seq.

    WORKFLOW defaults to the proxy's default workflow for this journal (the journal's path, or its URL).
    """
    from checkpoint_mcp.journal import notes, operations, report

    workflow = _workflow(location, workflow)
    with opened(location) as journal:
        summary, calls, resolutions = operations.describe(journal, workflow)
        policy = notes.policy_notes(journal.links(workflow))
    if seq is not None:
        matching = [c for c in calls if c.seq == seq]
        if not matching:
            raise click.ClickException(f"workflow {workflow!r} has no call #{seq}")
        if as_json:
            emit_json(
                {
                    **report.call_json(matching[0]),
                    "resolutions": [report.resolution_json(r) for r in resolutions if r.seq == seq],
                    "policyNotes": [notes.note_json(n) for n in notes.of_call(policy, seq)],
                }
            )
        else:
            click.echo(notes.with_notes(report.render_call(matching[0], resolutions), notes.of_call(policy, seq)))
        return
    if as_json:
        emit_json(
            {
                **report.summary_json(summary),
                "calls": [report.call_json(c) for c in calls],
                "resolutions": [report.resolution_json(r) for r in resolutions],
                "policyNotes": [notes.note_json(n) for n in policy],
            }
        )
    else:
        click.echo(notes.with_notes(report.render_show(summary, calls, resolutions), policy))


@journal_group.command("resolve")
@journal_option
@click.argument("target", nargs=-1, required=True, metavar="[WORKFLOW] SEQ")
@click.option("--completed", is_flag=True, help="It ran: replays return the result in --result-file.")
@click.option("--result-file", type=click.File("r"), help="JSON object: the tools/call result to record.")
@click.option("--failed", is_flag=True, help="It failed: replays return an error with --message.")
@click.option("--message", help="What went wrong, for --failed.")
@click.option("--release", is_flag=True, help="Forget it: the next call at this sequence runs again.")
@audit_key_option
def journal_resolve(
    location: str,
    audit_key_env: str | None,
    target: tuple[str, ...],
    completed: bool,
    result_file: IO[str] | None,
    failed: bool,
    message: str | None,
    release: bool,
) -> None:
    """Record what happened to the in-doubt (PENDING) or FAILED call SEQ of WORKFLOW, with an audit record.

    WORKFLOW defaults to the proxy's default workflow for this journal. Refused while a live proxy owns the
    workflow.
    """
    from checkpoint_mcp.journal import operations

    if len(target) > 2:
        raise click.UsageError("give [WORKFLOW] SEQ")
    from checkpoint_mcp.journal.base import MAX_SEQ

    seq = int(target[-1]) if target[-1].isdigit() else 0
    if not 1 <= seq <= MAX_SEQ:
        raise click.BadParameter(f"{target[-1]!r} is not an integer from 1 to {MAX_SEQ}", param_hint="SEQ")
    workflow = _workflow(location, target[0] if len(target) == 2 else None)

    if completed != (result_file is not None):
        raise click.UsageError("--completed and --result-file go together")
    if failed != (message is not None):
        raise click.UsageError("--failed and --message go together")
    result = result_file.read() if result_file is not None else None
    with opened(location, audit_key_env) as journal:
        done = operations.resolve(journal, workflow, seq, result=result, message=message, release=release)
    effect = {
        "completed": "replays now return the recorded result",
        "failed": "replays now return the recorded error",
        "released": "the next call at this sequence will run",
    }[done.action.value]
    click.echo(f"call #{seq} of {workflow} resolved as {done.action.value} (was {done.previous_state.value}): {effect}")


@journal_group.command("export")
@journal_option
@click.argument("workflow", required=False)
def journal_export(location: str, workflow: str | None) -> None:
    """Print WORKFLOW's calls, resolutions, approval requests and hash chain links as JSON lines (by default, the
    journal's default workflow); `checkpoint journal verify --export FILE` checks such a file without the database."""
    from checkpoint_mcp.clock import utc_now
    from checkpoint_mcp.journal import operations, report

    workflow = _workflow(location, workflow)
    with opened(location) as journal:
        _, calls, resolutions = operations.describe(journal, workflow)
        approvals = operations.approval_requests(journal, workflow)
        links = journal.links(workflow)
    for record in calls:
        click.echo(json.dumps(operations.export_call_json(record), ensure_ascii=False))
    for resolution in resolutions:
        click.echo(json.dumps(report.resolution_json(resolution), ensure_ascii=False))
    now = utc_now()
    for found in reversed(approvals):  # oldest first, as the other lines
        click.echo(json.dumps(operations.export_approval_json(found, now), ensure_ascii=False))
    for link in links:
        click.echo(json.dumps(operations.link_json(link), ensure_ascii=False))


@journal_group.command("gc")
@journal_option
@json_option
@click.option("--older-than", "older_than", required=True, metavar="DURATION", help="e.g. 30d, 12h, 1d12h, 90m.")
@audit_key_option
def journal_gc(location: str, as_json: bool, older_than: str, audit_key_env: str | None) -> None:
    """Remove COMPLETED and FAILED calls finished longer ago than DURATION (never PENDING ones).

    Workflows owned by a live proxy are skipped. A removed sequence is remembered: a later call there is
    refused, never re-run. The hash chain keeps an anchor for what was removed, so it still verifies.
    """
    from checkpoint_mcp.clock import parse_duration
    from checkpoint_mcp.journal import operations

    try:
        age = timedelta(seconds=parse_duration(older_than, zero=True))
    except CheckpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    with opened(location, audit_key_env) as journal:
        removed, skipped = operations.collect(journal, age)
    if as_json:
        emit_json({"removed": removed, "skipped": skipped})
        return
    total = sum(len(seqs) for seqs in removed.values())
    click.echo(f"removed {total} call(s) from {len(removed)} workflow(s)")
    for workflow, seqs in removed.items():
        click.echo(f"  {workflow}: {', '.join(f'#{s}' for s in seqs)}")
    for root in skipped:
        click.echo(f"  skipped {root}: owned by a live proxy")


journal_group.add_command(journal_verify)


@journal_group.command("ui")
@journal_option
@click.option(
    "--listen",
    default="127.0.0.1:0",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to serve the pages (port 0: a free one). A non-loopback address needs --auth-token-env.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
@click.option(
    "--auth-token-env",
    metavar="VAR",
    help="Require the token held in environment variable VAR instead of a random one (and allow any address).",
)
@audit_key_option
@settle_options
def journal_ui(
    location: str, listen: str, open_browser: bool, auth_token_env: str | None, audit_key_env: str | None, **more: Any
) -> None:
    """Serve the journal as local web pages: workflows, timelines, calls, and resolving in-doubt calls.

    Prints the URL, which carries a random token: without it every request is refused. Runs until Ctrl-C.
    """
    from checkpoint_mcp.cli.journal import key_from
    from checkpoint_mcp.ui.server import serve_ui

    try:
        key = key_from(audit_key_env)
        settle = settle_action_from(location, key, more)
        serve_ui(location, listen, open_browser=open_browser, token_env=auth_token_env, audit_key=key, settle=settle)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc
