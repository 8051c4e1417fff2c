"""Read-only: the approval requests a resumed session must know about, for the resume brief.

A tool policy's ``approve`` key holds a call until a person approves that exact call (``approvals.py``). When an
agent resumes, three kinds of requests of its workflow change what it should do next:

* **waiting**: pending, no one has decided yet: the user should be asked to approve (or deny) it;
* **approved**: granted, unused and not yet past its ``expires_at``: sending the same call again runs it, once;
* **denied**: a person said no, recently enough that the gate still answers the same call with that denial
  (within the request's ``expires_after`` of the decision): the agent must not send it again.

A used, expired or long-denied request changes nothing and is left out. Only the newest request of each call
counts, as for the gate (``ApprovalStore.approval_for``). This reads through a ``JournalReader`` (read-only, never
created, migrated or locked), with at most ``APPROVALS_FETCH`` rows per kind, newest first, on the
``approvals_by_call`` index's leading ``workflow_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from checkpoint_mcp.clock import iso_after, utc_now
from checkpoint_mcp.journal.approval_rows import APPROVAL_COLUMNS, Approval, ApprovalState, approval

if TYPE_CHECKING:
    from checkpoint_mcp.journal.digest import JournalReader

APPROVALS_SCHEMA: Final = 6
"""The first journal schema with the ``approvals`` table."""
APPROVALS_FETCH: Final = 20
"""At most this many of the newest open (pending or granted) and of the newest denied requests are read."""


@dataclass(frozen=True)
class OpenApprovals:
    """The approval requests of one workflow that matter to a resumed agent, newest first in each kind."""

    waiting: tuple[Approval, ...] = ()
    """Pending: a person has not decided yet."""
    approved: tuple[Approval, ...] = ()
    """Granted, unused, not expired: the same call, sent again, runs once."""
    denied: tuple[Approval, ...] = ()
    """Denied, and still answered as denied when the same call is sent again."""
    truncated: bool = False
    """There are more requests than were read (``APPROVALS_FETCH`` of each query): these are only the newest."""

    def __bool__(self) -> bool:
        return bool(self.waiting or self.approved or self.denied)


def open_approvals(reader: JournalReader, workflow: str, now: str | None = None) -> OpenApprovals:
    """The requests of ``workflow`` (the lineage's head, where calls go) waiting, approved or recently denied at
    ``now`` (the journal's clock; default: the current time). Empty for a journal older than schema 6.

    Raises:
        JournalUnavailable: the journal cannot be read.
    """
    if reader.schema < APPROVALS_SCHEMA:
        return OpenApprovals()
    moment = now or utc_now()
    limit = APPROVALS_FETCH + 1  # one more than kept: tells whether there are more
    select = f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE workflow_id = ?"
    open_rows = reader.rows(f"{select} AND state IN ('pending', 'granted') ORDER BY id DESC LIMIT {limit}", (workflow,))
    denied_rows = reader.rows(f"{select} AND state = 'denied' ORDER BY id DESC LIMIT {limit}", (workflow,))
    truncated = len(open_rows) > APPROVALS_FETCH or len(denied_rows) > APPROVALS_FETCH
    found = sorted(
        (approval(row) for row in [*open_rows[:APPROVALS_FETCH], *denied_rows[:APPROVALS_FETCH]]),
        key=lambda a: -a.id,
    )
    seen: set[str] = set()
    waiting: list[Approval] = []
    approved: list[Approval] = []
    denied: list[Approval] = []
    for request in found:
        if request.call_key in seen:
            continue  # an older request of the same call: the gate only looks at the newest
        seen.add(request.call_key)
        state = request.state_at(moment)
        if state is ApprovalState.PENDING:
            waiting.append(request)
        elif state is ApprovalState.GRANTED:
            approved.append(request)
        elif state is ApprovalState.DENIED and _still_denied(request, moment):
            denied.append(request)
    return OpenApprovals(tuple(waiting), tuple(approved), tuple(denied), truncated)


def _still_denied(request: Approval, now: str) -> bool:
    """True while the gate answers the same call with this denial (see ``ApprovalGate.refusal``)."""
    return request.decided_at is not None and iso_after(request.decided_at, request.expires_after) > now
