"""Approval gates: a call whose tool's policy says ``approve`` runs only on a person's approval of that exact call.

``CallJournal`` asks ``ApprovalGate.reserve`` where it would otherwise reserve such a call. The gate looks up the
newest request for the call (same workflow, and the same identity: the policy's ``match``/``ignore`` part where
the tool has one, else the signature, i.e. tool and arguments):

* granted and unexpired: the approval is used and the call reserved PENDING in one durable transaction
  (``Journal.reserve_approved``), so one approval never runs two calls, on one proxy, across fresh proxies or
  across replicas; the call goes upstream. After it, the same call needs a new approval (or is a repeat, as the
  policy says).
* denied (within the rule's ``approval_expires`` of the denial): refused as denied, no new request.
* pending: refused, naming the request that waits.
* none, used, or expired (an unused grant past its time is recorded as expired): a new request is made, durable
  before the refusal that names it is sent.

The refusal (``ApprovalRequired``) answers at once: headless clients time out on a request held open. Nothing the
agent sends can approve a call: neither its arguments, nor ``_meta``, nor a header is read here; only a decision
stored in the journal by `checkpoint journal approve` or the pages, or (``approve = "elicit"``) the client's user's
answer to an elicitation the proxy sent.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.clock import iso_after, utc_now
from checkpoint_mcp.intercept.policy import ToolRule
from checkpoint_mcp.journal.approval_rows import Approval, ApprovalState
from checkpoint_mcp.journal.approvals import ApprovalStore, Consumed
from checkpoint_mcp.journal.base import Journal, Lineage
from checkpoint_mcp.journal.report import approval_commands
from checkpoint_mcp.refusals import ApprovalRequired

ELICITED_BY = "the client's user (elicitation)"
"""``decided_by`` of an approval a client's user gave in answer to the proxy's elicitation."""
CLIENT_INFO_META = "io.modelcontextprotocol/clientInfo"
"""The request ``_meta`` key by which a 2026-07-28 client, which sends no ``initialize``, names itself."""


def client_of(params: Mapping[str, Any], hello: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Who sends the call ``params``: the client info of its ``_meta`` (2026-07-28), else ``hello`` (the
    ``clientInfo`` of the session's ``initialize``). Recorded as who asked; never trusted to decide anything."""
    meta = params.get("_meta")
    named = meta.get(CLIENT_INFO_META) if isinstance(meta, dict) else None
    return named if isinstance(named, dict) else hello


def store_of(journal: Journal) -> ApprovalStore:
    """The journal's approval requests (every journal Checkpoint opens keeps them)."""
    assert isinstance(journal, ApprovalStore)
    return journal


class ApprovalGate:
    """The approval side of ``CallJournal``: find, request, use."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._store = store_of(journal)

    def asker(self, client: Mapping[str, Any] | None) -> dict[str, Any]:
        """Who asks: the client as it introduced itself, and this process (the replica, where it is one)."""
        asked: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname()}
        if client:
            asked["client"] = {key: client[key] for key in ("name", "version") if isinstance(client.get(key), str)}
        if self._journal.replica_id is not None:
            asked["replica"] = self._journal.replica_id
        return asked

    def usable(self, workflow: str, call_key: str) -> Approval | None:
        """The granted, unexpired approval of this call, if there is one; an expired grant is recorded as such."""
        found = self._store.approval_for(workflow, call_key)
        if found is None or found.state is not ApprovalState.GRANTED:
            return None
        if found.state_at(utc_now()) is ApprovalState.EXPIRED:
            self._store.expire_approval(found.id)
            return None
        return found

    def reserve(
        self,
        lineage: Lineage,
        seq: int,
        found: Approval,
        stored: str,
        key: str | None,
        repeat_since: str | None,
    ) -> Consumed:
        """Use ``found`` and reserve its call at ``seq`` (see ``Journal.reserve_approved``)."""
        consumed = self._store.reserve_approved(
            lineage, seq, found.id, found.tool, stored, found.signature, key, found.identity, repeat_since
        )
        if consumed.reserved:
            debug.trigger("after_approval_used")  # crash tests: used and reserved, not yet sent upstream
        return consumed

    def refusal(
        self,
        workflow: str,
        tool: str,
        stored: str,
        signature: str,
        identity: str | None,
        rule: ToolRule,
        client: Mapping[str, Any] | None,
    ) -> ApprovalRequired:
        """The answer to a call with no usable approval: its denial, or its (new or waiting) request, durable."""
        call_key = identity or signature
        newest = self._store.approval_for(workflow, call_key)
        now = utc_now()
        denied = newest is not None and newest.state is ApprovalState.DENIED and newest.decided_at is not None
        if denied and newest is not None and iso_after(newest.decided_at or now, rule.approval_seconds) > now:
            return self._refused(workflow, tool, newest, denied=(newest.decided_by or "?", newest.reason or ""))
        if newest is not None and newest.state_at(now) is ApprovalState.EXPIRED:
            self._store.expire_approval(newest.id)
        asked = self._store.request_approval(
            workflow, tool, stored, signature, identity, self.asker(client), rule.approval_seconds
        )
        debug.trigger("after_approval_request")  # crash tests: the request is durable, its refusal not yet sent
        return self._refused(workflow, tool, asked)

    def _refused(
        self, workflow: str, tool: str, request: Approval, denied: tuple[str, str] | None = None
    ) -> ApprovalRequired:
        commands = approval_commands(self._journal.location, request.id)
        return ApprovalRequired(workflow=workflow, tool=tool, approval=request.id, commands=commands, denied=denied)


__all__ = ["ELICITED_BY", "ApprovalGate", "approval_commands", "store_of"]
