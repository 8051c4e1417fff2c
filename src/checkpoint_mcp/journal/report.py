"""What `checkpoint journal …` prints: human tables, JSON for scripts, and durations. No SQL, no I/O."""

from __future__ import annotations

import json
import shlex
from typing import Any

from checkpoint_mcp.clock import parse_time
from checkpoint_mcp.journal.base import Resolution, WorkflowSummary, described
from checkpoint_mcp.journal.records import CallRecord, CallState

SHORT_ARGUMENTS = 60


def operator_commands(journal: str, workflow: str, seq: int) -> dict[str, str]:
    """The exact `checkpoint journal …` commands that inspect and reconcile the call at ``seq``.

    The workflow is left out when it is the journal's default (its path or URL), which the commands assume.
    """
    from checkpoint_mcp.journal import default_workflow_id

    target = f"--journal {shlex.quote(journal)}"
    if workflow != default_workflow_id(journal):
        target += f" {shlex.quote(workflow)}"
    resolve = f"checkpoint journal resolve {target} {seq}"
    return {
        "show": f"checkpoint journal show {target} --seq {seq}",
        "completed": f"{resolve} --completed --result-file RESULT.json",
        "failed": f"{resolve} --failed --message 'what happened'",
        "release": f"{resolve} --release",
    }


def approval_commands(journal: str, approval_id: int) -> dict[str, str]:
    """The exact commands by which a person approves or denies request ``approval_id``, and the pages."""
    target = f"--journal {shlex.quote(journal)}"
    return {
        "approve": f"checkpoint journal approve {target} {approval_id}",
        "deny": f"checkpoint journal approve {target} {approval_id} --deny --reason 'why'",
        "pages": f"checkpoint journal ui {target}",
    }


def call_duration_text(record: CallRecord) -> str:
    """How long the call took, ``1.25 s``, or ``-`` while PENDING."""
    if not record.finished_at:
        return "-"
    start, end = parse_time(record.started_at), parse_time(record.finished_at)
    seconds = (end - start).total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def short_arguments(record: CallRecord) -> str:
    """The arguments on one line, cut to SHORT_ARGUMENTS characters; «redacted» when not journaled."""
    if record.redacted:
        return "«redacted»"
    text = record.arguments
    return text if len(text) <= SHORT_ARGUMENTS else text[: SHORT_ARGUMENTS - 1] + "…"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([line, *body])


def lineage_text(summary: WorkflowSummary) -> str:
    """``root`` or ``fork of PARENT at #N``."""
    if summary.parent is None:
        return "root"
    return f"fork of {summary.parent} at #{summary.fork_seq}"


def render_ls(summaries: list[WorkflowSummary]) -> str:
    """The `ls` table: in-doubt workflows first, then the most recently active."""
    if not summaries:
        return "The journal has no workflows yet."
    ordered = sorted(
        summaries, key=lambda s: (-s.counts.get(CallState.PENDING, 0), _negated(s.last_activity), s.workflow)
    )
    rows = [
        [
            s.workflow,
            lineage_text(s),
            str(s.counts.get(CallState.PENDING, 0)),
            str(s.counts.get(CallState.COMPLETED, 0)),
            str(s.counts.get(CallState.FAILED, 0)),
            s.last_activity or "-",
            _owner_text(s),
        ]
        for s in ordered
    ]
    head = ["WORKFLOW", "LINEAGE", "IN DOUBT", "COMPLETED", "FAILED", "LAST ACTIVITY", "LIVE OWNER"]
    if any(s.principal is not None for s in ordered):  # a gateway with an identity provider wrote some of them
        head.insert(1, "PRINCIPAL")
        for row, s in zip(rows, ordered, strict=True):
            row.insert(1, s.principal or "-")
    return _table(head, rows)


def _owner_text(summary: WorkflowSummary) -> str:
    """The live owner of a workflow, or the live proxies that share it, or ``-``."""
    if summary.owner is not None:
        return summary.owner.describe()
    if summary.sharers:
        return "shared: " + described(summary.sharers)
    return "-"


def _negated(timestamp: str | None) -> tuple[int, ...]:
    return tuple(-ord(c) for c in timestamp or "")


def summary_json(summary: WorkflowSummary) -> dict[str, Any]:
    """One workflow for `ls --json`."""
    return {
        "workflow": summary.workflow,
        "root": summary.root,
        "parent": summary.parent,
        "forkSeq": summary.fork_seq,
        "createdAt": summary.created_at,
        "counts": {state.value: summary.counts.get(state, 0) for state in CallState},
        "lastActivity": summary.last_activity,
        "principal": summary.principal,
        "owner": None
        if summary.owner is None
        else {"pid": summary.owner.pid, "host": summary.owner.host, "since": summary.owner.since},
        "sharers": [{"pid": s.pid, "host": s.host, "since": s.since} for s in summary.sharers],
    }


def json_or_text(text: str | None) -> Any:
    """A stored JSON text as its value (a text that is not JSON as itself); None stays None."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def call_json(record: CallRecord) -> dict[str, Any]:
    """One call for `show --json` and `export`."""
    return {
        "type": "call",
        "workflow": record.workflow,
        "seq": record.seq,
        "tool": record.tool,
        "arguments": None if record.redacted else json_or_text(record.arguments),
        "redacted": record.redacted,
        "key": record.key,
        "signature": record.signature,
        "state": record.state.value,
        "outcome": json_or_text(record.outcome),
        "startedAt": record.started_at,
        "finishedAt": record.finished_at,
        "rule": record.rule,
    }


def resolution_json(resolution: Resolution) -> dict[str, Any]:
    """One audit record for `show --json` and `export`."""
    return {
        "type": "resolution",
        "workflow": resolution.workflow,
        "seq": resolution.seq,
        "action": resolution.action.value,
        "previousState": resolution.previous_state.value,
        "previousOutcome": json_or_text(resolution.previous_outcome),
        "outcome": json_or_text(resolution.outcome),
        "by": resolution.user,
        "host": resolution.host,
        "at": resolution.at,
    }


def resolution_text(resolution: Resolution) -> str:
    """``#3 resolved as completed (was PENDING) by alice on host-a at …``."""
    return (
        f"#{resolution.seq} resolved as {resolution.action.value} (was {resolution.previous_state.value}) "
        f"by {resolution.user} on {resolution.host} at {resolution.at}"
    )


def render_show(summary: WorkflowSummary, calls: list[CallRecord], resolutions: list[Resolution]) -> str:
    """The timeline of one workflow."""
    header = [f"Workflow {summary.workflow} ({lineage_text(summary)}; created {summary.created_at})"]
    if summary.parent is not None:
        header.append(f"  calls before #{summary.fork_seq} are those of {summary.parent}")
    header.append(f"  live owner: {summary.owner.describe() if summary.owner else 'none'}")
    if summary.principal is not None:
        header.append(f"  principal: {summary.principal}")
    rows = [
        [f"#{r.seq}", r.tool, r.state.value, r.started_at, call_duration_text(r), short_arguments(r), r.key or ""]
        for r in calls
    ]
    headers = ["SEQ", "TOOL", "STATE", "STARTED", "DURATION", "ARGUMENTS", "KEY"]
    if any(r.rule is not None for r in calls):  # the policy rule that decided each call (journal schema 8)
        headers.append("RULE")
        for row, r in zip(rows, calls, strict=True):
            row.append(r.rule or "")
    timeline = _table(headers, rows) if rows else "(no calls)"
    parts = ["\n".join(header), timeline]
    if resolutions:
        parts.append("Resolutions:\n" + "\n".join(f"  {resolution_text(r)}" for r in resolutions))
    return "\n\n".join(parts)


def render_call(record: CallRecord, resolutions: list[Resolution]) -> str:
    """One call in full (`show --seq N`)."""
    arguments = (
        "«redacted»" if record.redacted else json.dumps(json.loads(record.arguments), indent=2, ensure_ascii=False)
    )
    outcome = json_or_text(record.outcome)
    lines = [
        f"Call #{record.seq} of {record.workflow}",
        f"  tool:       {record.tool}",
        f"  state:      {record.state.value}",
        f"  started:    {record.started_at}",
        f"  finished:   {record.finished_at or '-'} ({call_duration_text(record)})",
        f"  key:        {record.key or '-'}",
        f"  signature:  {record.signature}",
        f"  rule:       {record.rule or '-'}",
        "  arguments:",
        _indent(arguments),
        "  result:" if record.state is not CallState.FAILED else "  error:",
        _indent("-" if outcome is None else json.dumps(outcome, indent=2, ensure_ascii=False)),
    ]
    mine = [r for r in resolutions if r.seq == record.seq]
    if mine:
        lines += ["  resolutions:", *(f"    {resolution_text(r)}" for r in mine)]
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
