"""Approval requests in portable SQL: ask, decide, expire, and use one in the transaction that reserves its call.

``SqlJournal`` inherits these (a mixin, as ``Settlements`` and ``RepeatGuard``). Every step is one durable
transaction that also links an ``approval`` event onto the workflow's hash chain (``{"id", "action", "tool",
"signature", "arguments"}``: the arguments' digest, never the arguments; ``by`` and ``reason`` for a decision), so
`journal verify`, `journal show` and `export` see each request, decision, use and expiry.

What makes an approval single-use: ``reserve_approved`` moves it from granted to used with a compare-and-set
(``WHERE state = 'granted'``) in the same transaction that inserts the call's PENDING row. Of two proxies, or two
replicas on PostgreSQL, that try to use one approval at once, one changes the row and reserves its call; the
other changes nothing, reserves nothing and is told so. A crash before the commit leaves both as they were; after
it, the call is PENDING (in doubt if it was in flight) and the approval is spent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from checkpoint_mcp.clock import iso_after, utc_now
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.approval_rows import APPROVAL_COLUMNS, Approval, ApprovalState
from checkpoint_mcp.journal.approval_rows import approval as approval_row
from checkpoint_mcp.journal.base import Lineage
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.repeats import INSERT_CALL, find_repeat
from checkpoint_mcp.journal.rows import COLUMNS, Statements
from checkpoint_mcp.journal.rows import record as call_record

EVENT_KIND = "approval"
"""The kind of the chain events of approval requests (``detail.action``: requested, granted, denied, used, expired)."""


class Consumed(NamedTuple):
    """What ``reserve_approved`` did: whether the call was reserved (and the approval used), and, where a repeat
    rule was checked in the same transaction, the journaled call it repeats instead (then nothing was written)."""

    reserved: bool
    repeat: CallRecord | None = None


def _detail(found: Approval, action: str, **more: Any) -> dict[str, Any]:
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


class ApprovalStore(Statements):
    """Approval requests over the SQL journal's connection (a mixin of ``SqlJournal``)."""

    lock_signature: Callable[[str, str], None]  # ``RepeatGuard.lock_signature``: take turns on one key
    reading: Callable[[], AbstractContextManager[None]]  # ``SqlJournal.reading``

    def _one_approval(self, sql: str, params: tuple[Any, ...]) -> Approval | None:
        row = self.execute(f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {sql}", params).fetchone()
        return approval_row(row) if row else None

    def approval(self, approval_id: int) -> Approval | None:
        """The request ``approval_id``, or None."""
        with self.reading():
            return self._one_approval("id = ?", (approval_id,))

    def approval_for(self, workflow: str, call_key: str) -> Approval | None:
        """The newest request for the call ``call_key`` (identity, else signature) of ``workflow``, or None."""
        with self.reading():
            return self._one_approval("workflow_id = ? AND call_key = ? ORDER BY id DESC LIMIT 1", (workflow, call_key))

    def approvals(self, workflow: str | None = None) -> list[Approval]:
        """Every request (of ``workflow``, where given), newest first."""
        where, params = ("WHERE workflow_id = ? ", (workflow,)) if workflow is not None else ("", ())
        with self.reading():
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
        with self.transaction():
            self.lock_signature(workflow, f"approval\0{call_key}")
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
            self.link_txn([Event(workflow, EVENT_KIND, None, _detail(made, "requested"), now)])
        return made

    def decide_approval(self, approval_id: int, grant: bool, by: str, reason: str | None = None) -> Approval:
        """A person's decision on the pending request ``approval_id``: granted (usable for its ``expires_after``
        from now) or denied.

        Raises:
            UsageError: no such request, or it is not pending (already decided, used or expired).
        """
        with self.transaction():
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
            detail = _detail(found, action, by=by, reason=reason, expiresAt=expires_at)
            self.link_txn([Event(found.workflow, EVENT_KIND, None, detail, now)])
        return found._replace(state=state, decided_at=now, decided_by=by, reason=reason, expires_at=expires_at)

    def expire_approval(self, approval_id: int) -> bool:
        """Record that the grant ``approval_id`` passed its ``expires_at`` unused (False: it is not such a grant)."""
        now = utc_now()
        with self.transaction():
            found = self._one_approval("id = ? AND state = 'granted' AND expires_at <= ?", (approval_id, now))
            if found is None:
                return False
            expired = "UPDATE approvals SET state = 'expired' WHERE id = ? AND state = 'granted'"
            if self.execute(expired, (approval_id,)).rowcount != 1:
                return False  # used meanwhile, by a call another process reserved on it
            self.link_txn([Event(found.workflow, EVENT_KIND, None, _detail(found, "expired"), now)])
        return True

    def reserve_approved(
        self,
        lineage: Lineage,
        seq: int,
        approval_id: int,
        tool: str,
        arguments: str,
        signature: str,
        key: str | None = None,
        identity: str | None = None,
        repeat_since: str | None = None,
    ) -> Consumed:
        """Use the granted approval ``approval_id`` and reserve its call as PENDING at ``seq`` of the lineage's head,
        in one durable transaction; nothing at all if the approval is no longer granted and unexpired (another
        process used it first, or it expired). ``repeat_since``: also look the call up as a repeat since then
        (a tool policy's repeat rule, where replicas share the journal), in the same transaction.
        """
        workflow = lineage.head
        with self.transaction():
            self.lock_signature(lineage.root, identity or signature)
            if repeat_since is not None:

                def one(sql: str, params: tuple[Any, ...]) -> Any:
                    return self.execute(sql, params).fetchone()

                found = find_repeat(one, COLUMNS, call_record, (), lineage, signature, repeat_since, identity)
                if found is not None and found.state is not CallState.FAILED:
                    return Consumed(False, found)
            now = utc_now()
            used = self.execute(
                "UPDATE approvals SET state = 'used', used_at = ?, used_seq = ?"
                " WHERE id = ? AND state = 'granted' AND expires_at > ?",
                (now, seq, approval_id, now),
            ).rowcount
            if used != 1:
                return Consumed(False)
            spent = self._one_approval("id = ?", (approval_id,))
            assert spent is not None
            self.execute(INSERT_CALL, (workflow, seq, tool, arguments, signature, now, key, self.replica_id, identity))
            detail = chain.reserved_detail(tool, arguments, signature, key, identity)
            events = [
                Event(spent.workflow, EVENT_KIND, seq, _detail(spent, "used", workflow=workflow), now),
                Event(workflow, "reserved", seq, detail, now),
            ]
            self.link_txn(events)
        return Consumed(True)
