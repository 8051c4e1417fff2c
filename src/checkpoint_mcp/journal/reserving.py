"""``Journal.reserve`` in portable SQL: test a call's conditions and reserve it, in one durable transaction.

The conditions (``conditions.py``) are tested in the order given, each against what is committed, after taking
turns with every other writer on what it reads (``Statements.take_turns``: an advisory lock on PostgreSQL; SQLite's
write transaction already excludes every other writer), so two replicas racing cannot both pass one:

* ``NoRepeat``: the repeat lookup (``repeat_rows.find_repeat``, turns per lineage and identity); a call that
  happened or is happening fails it, unless the new call confirms a refused repeat of it (``confirming``) while that
  call's newest repeat event is still the refusal that asked.
* ``UsesApproval``: the call's newest request (turns per workflow and call) must be granted and unexpired; it is
  moved to used with a compare-and-set, so one approval never runs two calls.
* ``WithinLimit`` and ``WithinBudget``: the calls of the tool counted in the scope since the window's start
  (turns per scope and tool); the new call is counted (a ``metered`` row) in the same transaction, so a call in
  flight counts and two racing calls cannot both pass a limit of one. The rows of that scope and tool older than
  the longest window of the call's conditions count for nothing any more: they are deleted as it is counted.

The first condition that does not hold ends the transaction, rolled back: nothing is written, whatever the
conditions before it wrote (an approval used, old rows pruned), and the caller gets ``Unmet``, with what was found.

A ``metered`` row counts a call that ran or is running; one that never ran stops counting: its row goes with a
release of the call (``METERED_OF_CALL``: an operator's ``resolve --release`` of a call that had not completed, a
policy's settlement that proves it did not happen) and with its withdrawal (reserved, then never sent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.approval_rows import APPROVAL_COLUMNS, ApprovalState
from checkpoint_mcp.journal.approval_rows import approval as approval_row
from checkpoint_mcp.journal.approval_store import EVENT_KIND as APPROVAL_EVENT
from checkpoint_mcp.journal.approval_store import event_detail as approval_detail
from checkpoint_mcp.journal.base import Lineage
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.conditions import (
    Condition,
    Counted,
    NewCall,
    NoRepeat,
    Reservation,
    Reserved,
    Unmet,
    UsesApproval,
    WithinBudget,
    WithinLimit,
)
from checkpoint_mcp.journal.repeat_rows import CONFIRM_ASKED, find_repeat, newest_repeat, rank
from checkpoint_mcp.journal.rows import COLUMNS, INSERT_CALL, insert_params
from checkpoint_mcp.journal.rows import record as call_record
from checkpoint_mcp.journal.statements import Statements

INSERT_METERED = "INSERT INTO metered (scope, tool, at, amount, workflow_id, seq) VALUES (?, ?, ?, ?, ?, ?)"
_WINDOW = "FROM metered WHERE scope = ? AND tool = ? AND at >= ?"
_COUNT = f"SELECT count(*) {_WINDOW}"
_SUM = f"SELECT coalesce(sum(amount), 0) {_WINDOW}"
_COUNTED = f"SELECT at, amount {_WINDOW} ORDER BY at"
_PRUNE = "DELETE FROM metered WHERE scope = ? AND tool = ? AND at < ?"
METERED_OF_CALL = "DELETE FROM metered WHERE workflow_id = ? AND seq = ?"
"""Forget a call's ``metered`` rows: it never ran (released, or withdrawn)."""


class _Refused(Exception):
    """Raised inside the reservation's transaction to roll it back: ``unmet`` did not hold."""

    def __init__(self, unmet: Unmet) -> None:
        super().__init__()
        self.unmet = unmet


class Reserving(Statements):
    """``Journal.reserve`` over the SQL journal's connection: the part of ``SqlJournal`` that does it."""

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        return self.execute(sql, params).fetchone()

    def reserve(self, lineage: Lineage, seq: int, call: NewCall, conditions: Sequence[Condition]) -> Reservation:
        """See ``Journal.reserve``."""
        try:
            return self._reserve(lineage, seq, call, conditions)
        except _Refused as refused:
            return refused.unmet

    def _reserve(self, lineage: Lineage, seq: int, call: NewCall, conditions: Sequence[Condition]) -> Reserved:
        """``reserve``, or ``_Refused`` raised out of its transaction (which rolls it back)."""
        workflow = lineage.head
        windows: dict[tuple[str, str], str] = {}  # (scope, tool counted) -> the start of its longest window here
        for condition in conditions:
            if isinstance(condition, WithinLimit | WithinBudget):
                counted = (condition.scope, condition.tool or call.tool)
                windows[counted] = min(windows.get(counted, condition.since), condition.since)
        with self.transaction():
            now = utc_now()
            events: list[Event] = []
            approval: int | None = None
            metered: dict[tuple[str, str], float] = {}  # (scope, tool counted) -> the amount this call adds there
            for condition in conditions:
                if isinstance(condition, NoRepeat):
                    unmet = self._no_repeat(lineage, call, condition, events)
                elif isinstance(condition, UsesApproval):
                    unmet, used = self._uses_approval(workflow, seq, condition, now, events)
                    approval = used if unmet is None else None
                else:
                    counted = (condition.scope, condition.tool or call.tool)
                    unmet = self._within(counted, condition, windows.pop(counted, None))
                    if unmet is None:
                        amount = condition.amount if isinstance(condition, WithinBudget) else 0.0
                        metered[counted] = max(metered.get(counted, 0.0), amount)
                if unmet is not None:
                    raise _Refused(unmet)  # an approval used, or old rows pruned, before it are rolled back
            self.execute(INSERT_CALL, insert_params(workflow, seq, call, now, self.replica_id))
            for (scope, tool), amount in metered.items():
                self.execute(INSERT_METERED, (scope, tool, now, amount, workflow, seq))
            detail = chain.reserved_detail(call.tool, call.arguments, call.signature, call.key, call.identity)
            self.link_txn([*events, Event(workflow, "reserved", seq, detail, now)])
        return Reserved(approval)

    def _no_repeat(self, lineage: Lineage, call: NewCall, condition: NoRepeat, events: list[Event]) -> Unmet | None:
        self.take_turns("repeat", lineage.root, call.identity or call.signature)
        found = find_repeat(
            self._one, COLUMNS, call_record, (), lineage, call.signature, condition.since, call.identity
        )
        if found is None or rank(found) == 2:
            return None
        confirming = condition.confirming
        confirms = confirming is not None and (confirming.workflow, confirming.seq) == (found.workflow, found.seq)
        if found.happened and confirming is not None and confirms:
            newest = newest_repeat(self._one, found.workflow, found.seq)
            if newest is not None and newest[0].get("action") == CONFIRM_ASKED:
                events.append(confirming)
                return None
        return Unmet(condition, found=found)

    def _uses_approval(
        self, workflow: str, seq: int, condition: UsesApproval, now: str, events: list[Event]
    ) -> tuple[Unmet | None, int | None]:
        self.take_turns("approval", workflow, condition.call_key)
        row = self._one(
            f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE workflow_id = ? AND call_key = ? ORDER BY id DESC LIMIT 1",
            (workflow, condition.call_key),
        )
        newest = approval_row(row) if row else None
        if newest is None or newest.state_at(now) is not ApprovalState.GRANTED:
            return Unmet(condition, approval=newest), None
        used = self.execute(
            "UPDATE approvals SET state = 'used', used_at = ?, used_seq = ? WHERE id = ? AND state = 'granted'",
            (now, seq, newest.id),
        ).rowcount
        if used != 1:  # used meanwhile by a call another process reserved on it (read committed)
            return Unmet(condition, approval=newest._replace(state=ApprovalState.USED)), None
        spent = newest._replace(state=ApprovalState.USED, used_at=now, used_seq=seq)
        events.append(Event(workflow, APPROVAL_EVENT, seq, approval_detail(spent, "used", workflow=workflow), now))
        return None, newest.id

    def _within(
        self, counted: tuple[str, str], condition: WithinLimit | WithinBudget, prune_before: str | None
    ) -> Unmet | None:
        """Whether the window holds room for this call (``prune_before``: first delete the rows older than that,
        which no window of this call's counts)."""
        scope, tool = counted
        self.take_turns("metered", scope, tool)
        if prune_before is not None:
            self.execute(_PRUNE, (scope, tool, prune_before))
        window = (scope, tool, condition.since)
        if isinstance(condition, WithinLimit):
            passes = int(self._one(_COUNT, window)[0]) < condition.calls
        else:
            passes = float(self._one(_SUM, window)[0]) + condition.amount <= condition.most
        if passes:
            return None
        rows = self.execute(_COUNTED, window).fetchall()  # what the refusal says: which calls, and when
        return Unmet(condition, counted=tuple(Counted(str(at), float(amount)) for at, amount in rows))
