"""The operator's actions on a journal, as `checkpoint journal …` runs them: one call each, no SQL, no printing."""

from __future__ import annotations

import getpass
import json
import socket
from datetime import timedelta

from checkpoint_mcp.errors import FAILED_BY_OPERATOR, UsageError, WorkflowOwned
from checkpoint_mcp.journal.base import CallRecord, Journal, Resolution, ResolveAction, WorkflowSummary
from checkpoint_mcp.journal.report import iso_before


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
    or released to run again. Refused while a live proxy owns the workflow.

    Raises:
        UsageError: not exactly one outcome, a result that is not a JSON object, no such call or workflow.
        WorkflowOwned: a live proxy owns the workflow.
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
        user = getpass.getuser()
        error = {"code": FAILED_BY_OPERATOR, "message": message, "data": {"reason": "failed_by_operator", "by": user}}
        action, outcome = ResolveAction.FAILED, json.dumps(error, ensure_ascii=False, separators=(",", ":"))
    else:
        action, outcome = ResolveAction.RELEASED, None
    try:
        ownership = journal.acquire(root, command="checkpoint journal resolve")
    except WorkflowOwned as exc:
        raise WorkflowOwned(
            root, f"{exc.owner}; stop that proxy first: a live proxy's decisions must not change under it"
        ) from exc
    try:
        return journal.resolve(workflow, seq, action, outcome, getpass.getuser(), socket.gethostname())
    finally:
        ownership.release()


def collect(journal: Journal, age: timedelta) -> tuple[dict[str, list[int]], list[str]]:
    """Remove finished calls older than ``age`` from every workflow no live proxy owns.

    Returns what was removed (workflow -> sequences) and the roots skipped because a proxy owns them.
    """
    owned = sorted({s.root for s in journal.workflows() if s.owner is not None})
    return journal.collect(iso_before(age), skip_roots=owned), owned
