"""Approval requests in portable SQL: ask, decide, expire, and use one in the transaction that reserves its call.

``SqlApprovals`` is the SQL journal's part that keeps them (``Journal.approvals``). Every step is one durable
transaction that also links an ``approval`` event onto the workflow's hash chain (``{"id", "action", "tool",
"signature", "arguments"}``: the arguments' digest, never the arguments; ``by`` and ``reason`` for a decision), so
`journal verify`, `journal show` and `export` see each request, decision, use and expiry.

What makes an approval single-use: the reservation of its call (``Journal.reserve`` under ``UsesApproval``, see
``reserving.py``) moves it from granted to used with a compare-and-set (``WHERE state = 'granted'``) in the same
transaction that inserts the call's PENDING row. Of two proxies, or two
replicas on PostgreSQL, that try to use one approval at once, one changes the row and reserves its call; the
other changes nothing, reserves nothing and is told so. A crash before the commit leaves both as they were; after
it, the call is PENDING (in doubt if it was in flight) and the approval is spent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from checkpoint_mcp.clock import iso_after, utc_now
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.approval_rows import APPROVAL_COLUMNS, Approval, ApprovalState
from checkpoint_mcp.journal.approval_rows import approval as approval_row
from checkpoint_mcp.journal.base import Approvals
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.statements import Statements

EVENT_KIND = "approval"
"""The kind of the chain events of approval requests (``detail.action``: requested, granted, denied, used, expired)."""


def event_detail(found: Approval, action: str, **more: Any) -> dict[str, Any]:
    detail: dict[str, Any] = {
        "id": found.id,
        "action": action,
        "tool": found.tool,
        "signature": found.signature,
        "arguments": chain.text_digest(found.arguments),
    }
    if found.identity is not None:
        detail["identity"] = found.identity
    detail.update({key: value for key, value in more.items() if value is not None})
    return detail


class SqlApprovals(Approvals):
    """Approval requests over the SQL journal's connection: the part ``SqlJournal`` holds as ``approvals``."""

    def __init__(self, sql: Statements) -> None:
        self._sql = sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._sql.execute(sql, params)

    def _one_approval(self, sql: str, params: tuple[Any, ...]) -> Approval | None:
        row = self.execute(f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {sql}", params).fetchone()
        return approval_row(row) if row else None

    def approval(self, approval_id: int) -> Approval | None:
        """The request ``approval_id``, or None."""
        with self._sql.reading():
            return self._one_approval("id = ?", (approval_id,))

    def approval_for(self, workflow: str, call_key: str) -> Approval | None:
        """The newest request for the call ``call_key`` (identity, else signature) of ``workflow``, or None."""
        with self._sql.reading():
            return self._one_approval("workflow_id = ? AND call_key = ? ORDER BY id DESC LIMIT 1", (workflow, call_key))

    def approvals(self, workflow: str | None = None) -> list[Approval]:
        """Every request (of ``workflow``, where given), newest first."""
        where, params = ("WHERE workflow_id = ? ", (workflow,)) if workflow is not None else ("", ())
        with self._sql.reading():
            rows = self.execute(f"SELECT {APPROVAL_COLUMNS} FROM approvals {where}ORDER BY id DESC", params).fetchall()
        return [approval_row(row) for row in rows]

    def request_approval(
        self,
        workflow: str,
        tool: str,
        arguments: str,
        signature: str,
        identity: str | None,
        requested_by: Mapping[str, Any],
        expires_after: float,
    ) -> Approval:
        """The pending request for this call, made (and chained) if there is none yet: one per call, however often
        it is sent while it waits. ``expires_after``: how long a grant of it will stay usable, in seconds."""
        call_key = identity or signature
        with self._sql.transaction():
            self._sql.take_turns("approval", workflow, call_key)
            pending = self._one_approval(
                "workflow_id = ? AND call_key = ? AND state = 'pending' ORDER BY id DESC LIMIT 1", (workflow, call_key)
            )
            if pending is not None:
                return pending
            now = utc_now()
            asked_by = json.dumps(dict(requested_by), sort_keys=True, separators=(",", ":"))
            seconds = max(1, int(-(-expires_after // 1)))
            self.execute(
                "INSERT INTO approvals (workflow_id, tool, arguments, signature, identity, call_key, state,"
                " requested_at, requested_by, expires_after) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                (workflow, tool, arguments, signature, identity, call_key, now, asked_by, seconds),
            )
            made = self._one_approval("workflow_id = ? AND call_key = ? ORDER BY id DESC LIMIT 1", (workflow, call_key))
            assert made is not None
            self._sql.link_txn([Event(workflow, EVENT_KIND, None, event_detail(made, "requested"), now)])
        return made

    def decide_approval(self, approval_id: int, grant: bool, by: str, reason: str | None = None) -> Approval:
        """A person's decision on the pending request ``approval_id``: granted (usable for its ``expires_after``
        from now) or denied.

        Raises:
            UsageError: no such request, or it is not pending (already decided, used or expired).
        """
        with self._sql.transaction():
            found = self._one_approval("id = ?", (approval_id,))
            if found is None:
                raise UsageError(f"no approval request #{approval_id} in this journal (checkpoint journal approvals)")
            now = utc_now()
            if found.state is not ApprovalState.PENDING:
                shown = found.state_at(now).value
                raise UsageError(f"approval #{approval_id} is {shown}, not pending: it cannot be decided again")
            state = ApprovalState.GRANTED if grant else ApprovalState.DENIED
            expires_at = iso_after(now, found.expires_after) if grant else None
            changed = self.execute(
                "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, reason = ?, expires_at = ?"
                " WHERE id = ? AND state = 'pending'",
                (state.value, now, by, reason, expires_at, approval_id),
            ).rowcount
            if changed != 1:  # another decision (PostgreSQL, read committed) came first: the row says whose
                won = self._one_approval("id = ?", (approval_id,))
                shown = won.state_at(now).value if won is not None else "gone"
                who = f" by {won.decided_by}" if won is not None and won.decided_by else ""
                raise UsageError(f"approval #{approval_id} was {shown}{who} meanwhile: it cannot be decided again")
            action = "granted" if grant else "denied"
            detail = event_detail(found, action, by=by, reason=reason, expiresAt=expires_at)
            self._sql.link_txn([Event(found.workflow, EVENT_KIND, None, detail, now)])
        return found._replace(state=state, decided_at=now, decided_by=by, reason=reason, expires_at=expires_at)

    def expire_approval(self, approval_id: int) -> bool:
        """Record that the grant ``approval_id`` passed its ``expires_at`` unused (False: it is not such a grant)."""
        now = utc_now()
        with self._sql.transaction():
            found = self._one_approval("id = ? AND state = 'granted' AND expires_at <= ?", (approval_id, now))
            if found is None:
                return False
            expired = "UPDATE approvals SET state = 'expired' WHERE id = ? AND state = 'granted'"
            if self.execute(expired, (approval_id,)).rowcount != 1:
                return False  # used meanwhile, by a call another process reserved on it
            self._sql.link_txn([Event(found.workflow, EVENT_KIND, None, event_detail(found, "expired"), now)])
        return True
