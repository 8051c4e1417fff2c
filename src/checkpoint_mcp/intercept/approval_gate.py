"""What a call of a tool under ``approve`` gets without a usable approval: its request, named in the refusal.

The approval check (``decision/approval.py``) has the reservation use the call's newest request when it is granted
and unexpired (``UsesApproval``). Otherwise the gate answers, from the newest request the reservation found:

* denied (within the rule's ``approval_expires`` of the denial): refused as denied, no new request.
* pending: refused, naming the request that waits.
* none, used, or expired (an unused grant past its time is recorded as expired): a new request is made, durable
  before the refusal that names it is sent.

The refusal (``ApprovalRequired``) answers at once: headless clients time out on a request held open. Nothing the
agent sends can approve a call: neither its arguments, nor ``_meta``, nor a header is read here; only a decision
stored in the journal by `checkpoint journal approve` or the pages, or (``approve = "elicit"``) the client's user's
answer to an elicitation the proxy sent (``asking.py``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.clock import iso_after, utc_now
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.journal.report import approval_commands
from checkpoint_mcp.refusals import ApprovalRequired

ELICITED_BY = "the client's user (elicitation)"
"""``decided_by`` of an approval a client's user gave in answer to the proxy's elicitation."""


class ApprovalGate:
    """The requests side of approvals: who asks, and the refusal a call without a usable approval gets."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._store = journal.approvals

    def asker(self, client: Mapping[str, Any] | None) -> dict[str, Any]:
        """Who asks: the client as it introduced itself, and this process (the replica, where it is one)."""
        asked: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
        if client:
            asked["client"] = {key: client[key] for key in ("name", "version") if isinstance(client.get(key), str)}
        if self._journal.replica_id is not None:
            asked["replica"] = self._journal.replica_id
        return asked

    def refusal(self, workflow: str, call: Call, redact: bool, newest: Approval | None) -> ApprovalRequired:
        """The answer to ``call`` with no usable approval: its denial, or its (new or waiting) request, durable
        (``redact``: its arguments are not journaled). ``newest``: the call's newest request as the reservation
        found it.

        Raises:
            JournalError: the journal could not be read or written.
        """
        rule = call.rule
        now = utc_now()
        denied = newest is not None and newest.state is ApprovalState.DENIED and newest.decided_at is not None
        if denied and newest is not None and iso_after(newest.decided_at or now, rule.approval_seconds) > now:
            return self._refused(workflow, call.name, newest, denied=(newest.decided_by or "?", newest.reason or ""))
        if newest is not None and newest.state_at(now) is ApprovalState.EXPIRED:
            self._store.expire_approval(newest.id)
        asked = self._store.request_approval(
            workflow,
            call.name,
            call.stored(redact),
            call.signature,
            call.identity,
            self.asker(call.client),
            rule.approval_seconds,
        )
        debug.trigger("after_approval_request")  # crash tests: the request is durable, its refusal not yet sent
        return self._refused(workflow, call.name, asked)

    def _refused(
        self, workflow: str, tool: str, request: Approval, denied: tuple[str, str] | None = None
    ) -> ApprovalRequired:
        commands = approval_commands(self._journal.location, request.id)
        return ApprovalRequired(workflow=workflow, tool=tool, approval=request.id, commands=commands, denied=denied)


__all__ = ["ELICITED_BY", "ApprovalGate", "approval_commands"]
