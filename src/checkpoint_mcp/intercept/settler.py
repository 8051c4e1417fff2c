"""The interceptor's side of settling an in-doubt call met again: take the row, probe or re-send, conclude.

``settle_rules.py`` says what a probe proved; this module carries it out for one proxy: it takes the in-doubt row
(``Journal.take_in_doubt``, so that no other replica settles it at the same time), sends the probe or the call
again under its idempotency key, and, when the probe answers (or does not in time), records the settlement and
says what the client gets. Journal writes here are their own durable transactions: a settlement is recorded
before anything depends on it (the replay sent to the client, the call sent upstream again).
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.intercept.answers import replay_line
from checkpoint_mcp.intercept.decision.verdicts import Claimed, Settle
from checkpoint_mcp.intercept.policy import Probe
from checkpoint_mcp.intercept.settle_rules import (
    AskProbe,
    Finding,
    Resend,
    Unprovable,
    Verdict,
    idempotency_key,
    judge,
    plan,
    probed_outcome,
    with_key_argument,
)
from checkpoint_mcp.intercept.workflow import Workflow
from checkpoint_mcp.journal.base import Journal, ResolveAction
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.wire import dumps, error_line

logger = logging.getLogger(__name__)


class Forward(NamedTuple):
    """Send ``line`` upstream as the journaled call ``claimed`` (its answer completes the row)."""

    line: bytes
    claimed: Claimed


class Ask(NamedTuple):
    """Send the probe ``line`` upstream under ``probe_id``; the client's call waits for its answer."""

    line: bytes
    probe_id: str
    timeout: float
    pending: PendingProbe


class Answered(NamedTuple):
    """Answer the client with ``line`` (a replay of the settled call, or the in-doubt refusal)."""

    line: bytes


class PendingProbe(NamedTuple):
    """A client's call waiting for the probe of the in-doubt call it met."""

    ident: Any  # the client's request id
    line: bytes  # the client's request, as it came
    unsettled: Settle
    claimed: Claimed
    probe: Probe
    arguments: dict[str, Any]


class Settler:
    """Settles the in-doubt calls one interceptor meets."""

    def __init__(self, journal: Journal, calls: Workflow, redact_args: bool = False) -> None:
        """``redact_args``: --redact-args-in-journal; what a probe was asked is not journaled either."""
        self._journal = journal
        self._calls = calls
        self._redact = redact_args

    def begin(
        self, ident: Any, line: bytes, params: dict[str, Any], unsettled: Settle, *, probe_read_only: bool
    ) -> Forward | Ask | Answered:
        """Start settling the call ``line`` met as ``unsettled``: probe it, send it again under its key, or refuse.

        ``probe_read_only``: the probe's tool is known to be read-only (declared ``read_only`` in the policy, or
        marked ``readOnlyHint`` in a tools/list this proxy saw); a probe not known to be is never called.

        Raises:
            JournalError: the row could not be taken.
        """
        found = unsettled.record
        record = self._journal.take_in_doubt(found.workflow, found.seq)
        if record is None:
            return Answered(error_line(ident, unsettled.refusal.to_error()))
        claimed = self._calls.settling(record)
        step = plan(unsettled.rule, found.workflow, found.seq, found.key, params, line, probe_read_only=probe_read_only)
        if isinstance(step, AskProbe):
            pending = PendingProbe(ident, line, unsettled, claimed, step.probe, step.arguments)
            return Ask(step.request, step.ident, step.probe.timeout, pending)
        if isinstance(step, Resend) and self._journal.settle(
            found.workflow, found.seq, ResolveAction.RELEASED, None, step.by, dumps(step.evidence), keep_row=True
        ):
            logger.info("call #%d (%s) was in doubt: sent again %s", found.seq, found.tool, step.how)
            return Forward(step.line, claimed)
        return self._unsettled(ident, unsettled, claimed, step.finding if isinstance(step, Unprovable) else None)

    def answered(self, pending: PendingProbe, response: dict[str, Any]) -> Forward | Answered:
        """The probe answered: settle the call by its verdict."""
        started = pending.unsettled.record.started_at
        return self.conclude(pending, judge(pending.probe, pending.arguments, response, started))

    def conclude(self, pending: PendingProbe, finding: Finding) -> Forward | Answered:
        """Record what ``finding`` proved and say what the waiting call gets; never raises for the journal."""
        record, claimed = pending.unsettled.record, pending.claimed
        by = f"probe {finding.probe}"
        finding = finding._replace(redacted=self._redact)
        try:
            if finding.verdict is Verdict.HAPPENED:
                outcome = probed_outcome(finding, record.workflow, record.seq)
                if self._journal.settle(
                    record.workflow, record.seq, ResolveAction.COMPLETED, outcome, by, dumps(finding.evidence())
                ):
                    self._calls.finished(claimed)
                    logger.info("call #%d (%s) was in doubt: the %s showed it ran", record.seq, record.tool, by)
                    settled = record._replace(state=CallState.COMPLETED, outcome=outcome)
                    return Answered(replay_line(pending.ident, settled))
            elif finding.verdict is Verdict.NOT_HAPPENED and self._journal.settle(
                record.workflow, record.seq, ResolveAction.RELEASED, None, by, dumps(finding.evidence()), keep_row=True
            ):
                logger.info("call #%d (%s) was in doubt: the %s showed it did not run", record.seq, record.tool, by)
                line = pending.line
                idempotency = pending.unsettled.rule.idempotency
                if idempotency is not None and idempotency.argument is not None:
                    key = idempotency_key(record.workflow, record.seq, record.key)
                    line = with_key_argument(line, idempotency.argument, key)
                return Forward(line, claimed)
        except JournalError as exc:
            logger.error("could not record the settlement of call #%d: %s", record.seq, exc)
        return self._unsettled(pending.ident, pending.unsettled, claimed, finding)

    def _unsettled(self, ident: Any, unsettled: Settle, claimed: Claimed, finding: Finding | None) -> Answered:
        """The call stays in doubt: give the row back and refuse, saying what was tried."""
        self._calls.finished(claimed)
        if self._journal.replica_id is not None:
            try:
                unit = self._journal.unit()
                unit.disown(claimed.workflow, claimed.seq)
                unit.commit()
            except JournalError as exc:
                logger.error("could not give call #%d back: %s", claimed.seq, exc)
        error = unsettled.refusal.to_error()
        if finding is not None:
            logger.warning(
                "call #%d (%s) stays in doubt: probe %s: %s", claimed.seq, claimed.tool, finding.probe, finding.reason
            )
            error["message"] += f" (the probe {finding.probe} could not settle it: {finding.reason})"
            error["data"] = {**error.get("data", {}), "settlement": finding.evidence()}
        return Answered(error_line(ident, error))
