"""Approval requests (schema v6): what a row of ``approvals`` is, and the states it goes through.

A tool policy's ``approve`` key makes a call of its tool wait for a person's approval of that exact call. The
request is a row: the call it names (workflow, tool, arguments or only their digest, and what makes two calls the
same one: its identity where the policy's ``match``/``ignore`` names one, else its signature), who asked and when;
then who decided, and the call that used it. Pure: no SQL runs here.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, NamedTuple


class ApprovalState(enum.Enum):
    """The life of one approval request."""

    PENDING = "pending"  # waiting for a person
    GRANTED = "granted"  # approved: the same call, sent again before ``expires_at``, runs once
    DENIED = "denied"  # a person said no
    USED = "used"  # a call ran on it (``used_seq``): it never runs another
    EXPIRED = "expired"  # granted, but not used before ``expires_at``


class Approval(NamedTuple):
    """One row of ``approvals``."""

    id: int
    workflow: str
    tool: str
    arguments: str  # compact JSON of the arguments, or REDACTED_ARGUMENTS (the signature is then their digest)
    signature: str
    identity: str | None  # the policy's match/ignore identity, where the tool has one
    state: ApprovalState
    requested_at: str
    requested_by: str  # JSON object: the client (name, version), the replica, pid and host that asked
    expires_after: int  # seconds a grant stays usable (the policy's approval_expires when it was asked)
    decided_at: str | None = None
    decided_by: str | None = None
    reason: str | None = None
    expires_at: str | None = None
    used_at: str | None = None
    used_seq: int | None = None

    @property
    def call_key(self) -> str:
        """What makes another call the one this approval names (with the workflow): identity, else signature."""
        return self.identity or self.signature

    def state_at(self, now: str) -> ApprovalState:
        """The state as a person sees it at ``now``: a grant past its ``expires_at`` is expired, recorded or not."""
        if self.state is ApprovalState.GRANTED and self.expires_at is not None and self.expires_at <= now:
            return ApprovalState.EXPIRED
        return self.state


APPROVAL_COLUMNS = (
    "id, workflow_id, tool, arguments, signature, identity, state, requested_at, requested_by, expires_after,"
    " decided_at, decided_by, reason, expires_at, used_at, used_seq"
)
"""Every column of ``approvals``, in the order ``approval`` reads them."""


def approval(row: Sequence[Any]) -> Approval:
    """The ``Approval`` of an ``approvals`` row selected with ``APPROVAL_COLUMNS``."""
    return Approval(
        id=int(row[0]),
        workflow=row[1],
        tool=row[2],
        arguments=row[3],
        signature=row[4],
        identity=row[5],
        state=ApprovalState(row[6]),
        requested_at=row[7],
        requested_by=row[8],
        expires_after=int(row[9]),
        decided_at=row[10],
        decided_by=row[11],
        reason=row[12],
        expires_at=row[13],
        used_at=row[14],
        used_seq=int(row[15]) if row[15] is not None else None,
    )
