"""The operator's actions on a journal, as `checkpoint journal …` runs them: one call each, no SQL, no printing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from checkpoint_mcp.clock import iso_before
from checkpoint_mcp.errors import UsageError, WorkflowOwned
from checkpoint_mcp.journal import approval_audit, approval_report, audit, chain, report
from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.base import Journal, Resolution, ResolveAction, WorkflowSummary
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS, CallRecord
from checkpoint_mcp.platforms.paths import user_name
from checkpoint_mcp.refusals import FAILED_BY_OPERATOR


def describe(journal: Journal, workflow: str) -> tuple[WorkflowSummary, list[CallRecord], list[Resolution]]:
    """One workflow's summary, calls and audit trail.

    Raises:
        UsageError: the journal has no such workflow.
    """
    for summary in journal.workflows():
        if summary.workflow == workflow:
            return summary, journal.calls(workflow), journal.resolutions(workflow)
    known = ", ".join(sorted(s.workflow for s in journal.workflows())) or "none"
    raise UsageError(f"the journal has no workflow {workflow!r} (known: {known})")


def resolve(
    journal: Journal,
    workflow: str,
    seq: int,
    *,
    result: str | None = None,
    message: str | None = None,
    release: bool = False,
) -> Resolution:
    """Record what happened to an in-doubt or failed call: completed with ``result``, failed with ``message``,
    or released to run again. Refused while a live proxy owns the workflow alone, and for a call still in flight in
    a live proxy that shares it; the sessions that share it go on meanwhile.

    Raises:
        UsageError: not exactly one outcome, a result that is not a JSON object, no such call or workflow, or a
            call in flight.
        WorkflowOwned: a live proxy owns the workflow alone.
    """
    chosen = [result is not None, message is not None, release]
    if sum(chosen) != 1:
        raise UsageError("give exactly one of --completed (with --result-file), --failed (with --message), --release")
    root = journal.root_of(workflow)
    if root is None:
        raise UsageError(f"the journal has no workflow {workflow!r}")
    if result is not None:
        try:
            parsed = json.loads(result)
        except ValueError as exc:
            raise UsageError(f"the result file is not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise UsageError('the result file must hold a JSON object: the tools/call result, e.g. {"content": [...]}')
        action, outcome = ResolveAction.COMPLETED, json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
    elif message is not None:
        user = user_name()
        error = {"code": FAILED_BY_OPERATOR, "message": message, "data": {"reason": "failed_by_operator", "by": user}}
        action, outcome = ResolveAction.FAILED, json.dumps(error, ensure_ascii=False, separators=(",", ":"))
    else:
        action, outcome = ResolveAction.RELEASED, None
    try:
        # Shared: the sessions that share the workflow go on (a call in flight in one of them is refused by
        # ``Journal.resolve``); a proxy that owns it alone numbers its calls, and its decisions must not change.
        ownership = journal.acquire(root, command="checkpoint journal resolve", shared=True)
    except WorkflowOwned as exc:
        raise WorkflowOwned(
            root, f"{exc.owner}; stop that proxy first: a live proxy's decisions must not change under it"
        ) from exc
    try:
        return journal.resolve(workflow, seq, action, outcome, user_name(), socket.gethostname())
    finally:
        ownership.release()


def approval_requests(journal: Journal, workflow: str | None = None) -> list[Approval]:
    """The approval requests of ``workflow`` (of every workflow if None), newest first."""
    return journal.approvals.approvals(workflow)


def decide_approval(journal: Journal, approval_id: int, grant: bool, reason: str | None = None) -> Approval:
    """A person's decision on the pending approval request ``approval_id``, recorded as this OS user on this host
    (as `resolve` records who resolved a call). Needs no ownership: the proxy that asked is usually still live.

    Raises:
        UsageError: no such request, or it is not pending (already decided, used or expired).
    """
    return journal.approvals.decide_approval(approval_id, grant, f"{user_name()}@{socket.gethostname()}", reason)


def collect(journal: Journal, age: timedelta) -> tuple[dict[str, list[int]], list[str]]:
    """Remove finished calls older than ``age`` from every workflow no live proxy owns or shares.

    Returns what was removed (workflow -> sequences) and the roots skipped because a proxy owns them.
    """
    owned = sorted({s.root for s in journal.workflows() if s.owner is not None or s.sharers})
    return journal.collect(iso_before(age), skip_roots=owned), owned


def _call_rows(records: list[CallRecord]) -> dict[int, dict[str, Any]]:
    return {
        r.seq: chain.row_digest(
            r.tool, r.arguments, r.signature, r.state.value, r.outcome, r.started_at, r.finished_at, r.key, r.identity
        )
        for r in records
    }


def verify(journal: Journal, workflow: str | None, key: bytes | None) -> list[audit.ChainReport]:
    """Walk the hash chain of ``workflow`` (of every workflow if None) and check its call rows against it.

    Raises:
        UsageError: the journal knows no such workflow.
    """
    known = journal.chained_workflows()
    if workflow is not None and workflow not in known:
        raise UsageError(f"the journal has no workflow {workflow!r} (known: {', '.join(known) or 'none'})")
    chosen = known if workflow is None else [workflow]
    reports = []
    for name in chosen:
        links = journal.links(name)
        found = audit.verify_chain(name, links, _call_rows(journal.calls(name)), key)
        rows = [approval_audit.facts(a) for a in approval_requests(journal, name)]
        reports.append(_with_approvals(found, links, rows))
    return reports


def _with_approvals(
    report: audit.ChainReport, links: list[chain.Link], rows: list[approval_audit.ApprovalFacts]
) -> audit.ChainReport:
    """``report`` with the approval rows that differ from the chain, once the chain itself holds."""
    if not report.ok:
        return report  # the first break is the chain's own: rows are checked against a chain that holds
    return report._replace(breaks=tuple(approval_audit.approval_breaks(links, rows, report.start)))


def link_json(link: chain.Link) -> dict[str, Any]:
    """One link of the chain for `export` (its detail as JSON: re-canonicalised, it gives the same hash)."""
    return {
        "type": "link",
        "workflow": link.workflow,
        "id": link.id,
        "seq": link.seq,
        "kind": link.kind,
        "detail": json.loads(link.detail),
        "at": link.at,
        "prev": link.prev,
        "hash": link.hash,
    }


def export_approval_json(found: Approval, now: str) -> dict[str, Any]:
    """One approval request for `export`: as `approvals --json` has it, plus its arguments exactly as stored (what
    the chain's digest covers, so that `verify --export` can check them)."""
    return {**approval_report.approval_json(found, now), "stored": {"arguments": found.arguments}}


def export_call_json(record: CallRecord) -> dict[str, Any]:
    """One call for `export`: as `show --json` has it, plus its texts exactly as stored (what the chain's digests
    cover, so that `verify --export` can check them)."""
    return {**report.call_json(record), "stored": {"arguments": record.arguments, "outcome": record.outcome}}


def _exported_row(item: dict[str, Any]) -> dict[str, Any]:
    """The row digest of an exported call, from its stored texts; a text that no longer reads as the call's shown
    value (one of them was edited in the file) gets a digest no chain has."""
    stored = item["stored"]
    shown = {"arguments": None if item["redacted"] else item["arguments"], "outcome": item["outcome"]}
    digests: dict[str, str | None] = {}
    for field in ("arguments", "outcome"):
        text = stored[field]
        digests[field] = chain.text_digest(text)
        if field == "arguments" and item["redacted"]:
            agrees = text == REDACTED_ARGUMENTS
        else:
            agrees = report.json_or_text(text) == shown[field]
        if not agrees:
            digests[field] = f"(the shown {field} differ from the stored text)"
    return {
        "tool": item["tool"],
        "arguments": digests["arguments"],
        "signature": item["signature"],
        "state": item["state"],
        "outcome": digests["outcome"],
        "started_at": item["startedAt"],
        "finished_at": item["finishedAt"],
        "key": item["key"],
    }


def verify_export(lines: Iterable[str], key: bytes | None) -> list[audit.ChainReport]:
    """Verify the chains and calls of an `export` file, without the journal.

    Raises:
        UsageError: a line is not a JSON object, or a link or call line lacks a field.
    """
    links: dict[str, list[chain.Link]] = {}
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    approvals: dict[str, list[approval_audit.ApprovalFacts]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if item["type"] == "link":
                detail = chain.canonical_text(item["detail"])
                found = chain.Link(
                    int(item["id"]), item["workflow"], item["seq"], item["kind"], detail, item["at"], item["prev"],
                    item["hash"],
                )  # fmt: skip
                links.setdefault(found.workflow, []).append(found)
            elif item["type"] == "call":
                rows.setdefault(item["workflow"], {})[int(item["seq"])] = _exported_row(item)
            elif item["type"] == "approval":
                approvals.setdefault(item["workflow"], []).append(approval_audit.exported_facts(item))
        except (ValueError, KeyError, TypeError) as exc:
            message = f"line {number} of the export is not a line of `checkpoint journal export`: {exc}"
            raise UsageError(message) from exc
    return [
        _with_approvals(
            audit.verify_chain(w, links.get(w, []), rows.get(w, {}), key),  # links in the file's order
            links.get(w, []),
            approvals.get(w, []),
        )
        for w in sorted(set(links) | set(rows) | set(approvals))
    ]
