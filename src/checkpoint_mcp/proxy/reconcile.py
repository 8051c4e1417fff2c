"""`checkpoint journal reconcile`: settle a workflow's in-doubt calls on demand, by the tool policies' own means.

The operator's counterpart of what a proxy does when a call meets an in-doubt row: for each PENDING call no live
process runs, the rule of its tool decides. A probe is asked through an MCP session of our own with the upstream
(``upstream/client.py``); what it proves is recorded as a proxy would (``Journal.settle``): happened → COMPLETED,
with the evidence; did not happen → released (the next call at that sequence runs). A tool with an idempotency key
(in an argument, or an HTTP header of an ``--upstream-url`` upstream) is sent again under the very key its first
attempt carried, and its answer completes the row.
Anything else (no rule, an error, a timeout, an ambiguous probe, redacted arguments) leaves the call in doubt.
``dry_run`` asks the probes (they only read) but writes nothing and re-sends nothing.

Like `checkpoint journal resolve`, it is refused while a live proxy owns the workflow.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from checkpoint_mcp.config import RemoteConfig
from checkpoint_mcp.errors import UpstreamError, UsageError, WorkflowOwned
from checkpoint_mcp.intercept.policy import Policy, ToolRule
from checkpoint_mcp.intercept.settle_rules import (
    Finding,
    PointerError,
    Verdict,
    idempotency_key,
    judge,
    probe_arguments,
    probed_outcome,
    resent_evidence,
    unanswered,
)
from checkpoint_mcp.journal.base import Journal, ResolveAction
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.upstream.client import McpClient
from checkpoint_mcp.wire import dumps

logger = logging.getLogger(__name__)


class Decision(NamedTuple):
    """What reconcile decided (or, in a dry run, would decide) for one in-doubt call."""

    workflow: str
    seq: int
    tool: str
    outcome: str  # completed | released | re-sent | failed | in doubt
    how: str  # the means and the reason, in words
    evidence: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """The decision as ``--json`` prints it."""
        return self._asdict()


async def reconcile(
    journal: Journal,
    workflow: str,
    policy: Policy,
    upstream: Upstream,
    timeout: float,
    *,
    dry_run: bool,
    only: int | None = None,
) -> list[Decision]:
    """Settle every in-doubt call of ``workflow`` (or only the one at sequence ``only``) its tool's policy can
    settle; a decision per in-doubt call.

    Raises:
        UsageError: the journal has no such workflow, or a probe's tool is not read-only.
        WorkflowOwned: a live proxy owns the workflow.
        UpstreamError: the upstream could not be started or did not answer its handshake.
    """
    root = journal.root_of(workflow)
    if root is None:
        raise UsageError(f"the journal has no workflow {workflow!r}")
    try:
        ownership = journal.acquire(root, command="checkpoint journal reconcile")
    except WorkflowOwned as exc:
        raise WorkflowOwned(
            root, f"{exc.owner}; stop that proxy first: a live proxy settles its own in-doubt calls"
        ) from exc
    try:
        rows = [
            row
            for row in journal.calls(workflow)
            if row.state is CallState.PENDING
            and (only is None or row.seq == only)
            and (row.replica is None or not journal.replica_alive(row.replica))
        ]
        if not rows:
            return []
        async with McpClient(upstream, timeout) as client:
            policy.check_tools(await client.list_tools())
            return [await _one(journal, client, policy.rule_for(row.tool), row, dry_run) for row in rows]
    finally:
        ownership.release()


async def _one(journal: Journal, client: McpClient, rule: ToolRule, row: CallRecord, dry_run: bool) -> Decision:
    def decided(outcome: str, how: str, evidence: dict[str, Any] | None = None) -> Decision:
        return Decision(row.workflow, row.seq, row.tool, outcome, how, evidence)

    if rule.probe is None and rule.idempotency is None:
        return decided("in doubt", "its tool's policy declares no probe and no idempotency key")
    if row.redacted:
        return decided("in doubt", "its arguments were not journaled (--redact-args-in-journal)")
    arguments = json.loads(row.arguments)
    if rule.probe is not None:
        finding = await _probe(client, rule, arguments, row.started_at)
        return _record_finding(journal, row, finding, dry_run)
    return await _resend(journal, client, rule, row, arguments, dry_run)


async def _resend(
    journal: Journal, client: McpClient, rule: ToolRule, row: CallRecord, arguments: dict[str, Any], dry_run: bool
) -> Decision:
    def decided(outcome: str, how: str, evidence: dict[str, Any] | None = None) -> Decision:
        return Decision(row.workflow, row.seq, row.tool, outcome, how, evidence)

    idempotency = rule.idempotency
    assert idempotency is not None
    key = idempotency_key(row.workflow, row.seq, row.key)
    how = f"argument {idempotency.argument}" if idempotency.argument is not None else f"header {idempotency.header}"
    evidence = resent_evidence(key, how)
    if dry_run:
        return decided("re-sent", f"would be sent again under its idempotency key {key}", evidence)
    if journal.take_in_doubt(row.workflow, row.seq) is None or not journal.settle(
        row.workflow, row.seq, ResolveAction.RELEASED, None, "idempotency key", dumps(evidence), keep_row=True
    ):
        return decided("in doubt", "another process took it meanwhile")
    sent = {**arguments}
    headers: dict[str, str] = {}
    if idempotency.argument is not None:
        sent.setdefault(idempotency.argument, key)
    else:
        assert idempotency.header is not None
        headers[idempotency.header] = key
    try:
        answer = await client.exchange("tools/call", {"name": row.tool, "arguments": sent}, headers=headers)
    except UpstreamError as exc:
        return decided("in doubt", f"sent again under its key {key}, but got no answer: {exc}", evidence)
    unit = journal.unit()
    if "error" in answer:
        unit.finish(row.workflow, row.seq, CallState.FAILED, dumps(answer["error"]))
        unit.commit()
        return decided("failed", f"sent again under its key {key}: the upstream answered with an error", evidence)
    unit.finish(row.workflow, row.seq, CallState.COMPLETED, dumps(answer.get("result")))
    unit.commit()
    return decided("completed", f"sent again under its idempotency key {key}: the upstream answered", evidence)


async def _probe(client: McpClient, rule: ToolRule, arguments: dict[str, Any], started_at: str) -> Finding:
    probe = rule.probe
    assert probe is not None
    try:
        built = probe_arguments(probe, arguments)
    except PointerError as exc:
        return unanswered(probe, {}, f"the probe's arguments cannot be built: {exc}")
    try:
        answer = await client.exchange("tools/call", {"name": probe.tool, "arguments": built}, probe.timeout)
    except UpstreamError as exc:
        return unanswered(probe, built, str(exc))
    return judge(probe, built, answer, started_at)


def _record_finding(journal: Journal, row: CallRecord, finding: Finding, dry_run: bool) -> Decision:
    evidence = finding.evidence()
    by = f"probe {finding.probe}"
    if finding.verdict is Verdict.UNKNOWN:
        return Decision(row.workflow, row.seq, row.tool, "in doubt", f"{by}: {finding.reason}", evidence)
    happened = finding.verdict is Verdict.HAPPENED
    outcome = "completed" if happened else "released"
    how = f"{by}: {finding.reason}" + ("" if happened else " (the next call at this sequence runs)")
    if dry_run:
        return Decision(row.workflow, row.seq, row.tool, outcome, f"would be {outcome}: {how}", evidence)
    action = ResolveAction.COMPLETED if happened else ResolveAction.RELEASED
    result = probed_outcome(finding, row.workflow, row.seq) if happened else None
    if journal.take_in_doubt(row.workflow, row.seq) is None or not journal.settle(
        row.workflow, row.seq, action, result, by, dumps(evidence)
    ):
        return Decision(row.workflow, row.seq, row.tool, "in doubt", "another process took it meanwhile", evidence)
    return Decision(row.workflow, row.seq, row.tool, outcome, how, evidence)


def render(decisions: list[Decision], dry_run: bool) -> str:
    """The decisions as the command prints them, one line per in-doubt call."""
    if not decisions:
        return "no call is in doubt"
    lines = [f"#{d.seq} {d.tool}: {d.outcome} — {d.how}" for d in decisions]
    if dry_run:
        lines.append("(dry run: nothing was written or sent again)")
    return "\n".join(lines)


SettleAction = Callable[[str, int, bool], Awaitable[str]]
"""What the operator's pages call to settle one in-doubt call: (workflow, seq, dry_run) -> the decision, in words."""


def settle_action(
    location: str,
    policy: Policy,
    upstream_cmd: str | None,
    remote: RemoteConfig | None,
    timeout: float,
    audit_key: bytes | None = None,
) -> SettleAction:
    """The pages' settle action for the journal at ``location``: each use opens the journal and starts (or
    reaches) the upstream, as `checkpoint journal reconcile` does, for one call.

    Each use runs on a worker thread, with an event loop, a journal connection and an upstream of its own: the
    pages may be mounted in `checkpoint serve`, whose event loop carries every client's MCP traffic, and a
    settle's journal steps may wait (for a write lock, for PostgreSQL) and its probe for up to its timeout.

    The action raises what ``reconcile`` raises, and ``JournalError`` when the journal cannot be opened.
    """

    async def settled(workflow: str, seq: int, dry_run: bool) -> str:
        from checkpoint_mcp.journal import open_journal
        from checkpoint_mcp.upstream.client import open_upstream

        journal = open_journal(location, create=False, audit_key=audit_key)
        try:
            upstream = open_upstream(upstream_cmd, remote)
            decisions = await reconcile(journal, workflow, policy, upstream, timeout, dry_run=dry_run, only=seq)
        finally:
            journal.close()
        return render(decisions, dry_run)

    async def act(workflow: str, seq: int, dry_run: bool) -> str:
        return await asyncio.to_thread(lambda: asyncio.run(settled(workflow, seq, dry_run)))

    return act
