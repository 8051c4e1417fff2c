"""A tool policy's repeat lookup: the journaled call of a lineage with a given identity, within a window.

A call's identity is its signature, or, where its tool's policy names the part of the arguments that counts
(``match`` / ``ignore``), the hash of that part, stored in the ``identity`` column (schema v5). One indexed read
per branch of the lineage (``calls_by_signature (workflow_id, signature, started_at)``, schema v4, or the partial
``calls_by_identity``), so it stays a handful of rows however long the journal. Among several matches the one
that decides is the newest COMPLETED call, else the newest PENDING one, else the newest FAILED one: a call that
completed once is never run again because a later attempt failed.

Where replicas share the journal, the lookup and the reservation of a new call must be one step, else two
replicas that receive the same call within a few milliseconds both find nothing and both run it.
``RepeatGuard.reserve_unless_repeat`` makes them one transaction that first takes a lock on the call's
(lineage, identity) (``lock_signature``: a transaction-scoped advisory lock on PostgreSQL; nothing on SQLite,
whose write transaction already excludes every other writer): the second replica waits for the first's commit and
then finds its PENDING row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.base import Lineage
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.rows import COLUMNS, Statements
from checkpoint_mcp.journal.rows import record as call_record

_RANK = {CallState.COMPLETED: 0, CallState.PENDING: 1, CallState.FAILED: 2}
_ORDER = "CASE state WHEN 'COMPLETED' THEN 0 WHEN 'PENDING' THEN 1 ELSE 2 END, started_at DESC, seq DESC"


def find_repeat(
    one: Callable[[str, tuple[Any, ...]], Sequence[Any] | None],
    columns: str,
    record: Callable[[Sequence[Any]], CallRecord],
    pending: Iterable[CallRecord],
    lineage: Lineage,
    signature: str,
    since: str,
    identity: str | None = None,
) -> CallRecord | None:
    """The row that decides a repeat: ``one`` runs a query for one row, ``pending`` are the unit's own rows.

    ``identity``: look the call up by it (its tool's policy names a part of the arguments), not by ``signature``.
    """
    column, value = ("identity", identity) if identity is not None else ("signature", signature)
    waiting = [row for row in pending if getattr(row, column) == value and row.started_at >= since]
    found: list[CallRecord] = []
    for branch, start, limit in lineage.ranges():
        found.extend(
            row
            for row in waiting
            if row.workflow == branch.workflow and row.seq >= start and (limit is None or row.seq < limit)
        )
        sql = f"SELECT {columns} FROM calls WHERE workflow_id = ? AND {column} = ? AND started_at >= ? AND seq >= ?"
        params: tuple[Any, ...] = (branch.workflow, value, since, start)
        if limit is not None:
            sql += " AND seq < ?"
            params += (limit,)
        row = one(f"{sql} ORDER BY {_ORDER} LIMIT 1", params)
        if row:
            found.append(record(row))
    if not found:
        return None
    newest_first = sorted(found, key=lambda r: (r.started_at, r.seq), reverse=True)
    return min(newest_first, key=lambda r: _RANK[r.state])  # min keeps the first (newest) of equal rank


INSERT_CALL = (
    "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at, idempotency_key, replica_id,"
    " identity) VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?)"
)


def signature_lock_key(root: str, signature: str) -> int:
    """The advisory lock id of one signature (or identity: never equal to a signature) in one lineage: 64 bits
    of SHA-256, as a signed bigint."""
    digest = hashlib.sha256(f"repeat\0{root}\0{signature}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class RepeatGuard(Statements):
    """``reserve_unless_repeat`` over the SQL journal's connection (a mixin of ``SqlJournal``)."""

    def lock_signature(self, root: str, signature: str) -> None:
        """Make concurrent lookups of one signature in one lineage take turns, until the transaction ends.

        SQLite needs nothing: a write transaction (BEGIN IMMEDIATE) already excludes every other writer.
        """

    def reserve_unless_repeat(
        self,
        lineage: Lineage,
        since: str,
        seq: int,
        tool: str,
        arguments: str,
        signature: str,
        key: str | None = None,
        identity: str | None = None,
        confirmed: Event | None = None,
    ) -> tuple[CallRecord | None, bool]:
        """Look the identity (or signature) up and, unless a COMPLETED or PENDING call has it, reserve the call at
        ``seq`` of the lineage's head: one durable transaction, serialized per (lineage, identity) (see
        ``Journal.reserve_unless_repeat``). Returns the row that decides the repeat (None: none) and whether the
        call was reserved.

        ``confirmed``: the call confirms a refused repeat (``repeat = "confirm"``) of the COMPLETED call this event
        names; it is reserved over that call, and the event linked, only while that call's newest repeat event is
        still the refusal that asked for the confirmation (``newest_repeat_txn``), so that of two replicas given
        the confirmation at once only one runs it.

        Raises:
            JournalError: the journal could not be read or written (nothing was reserved).
        """
        with self.transaction():
            self.lock_signature(lineage.root, identity or signature)

            def one(sql: str, params: tuple[Any, ...]) -> Any:
                return self.execute(sql, params).fetchone()

            found = find_repeat(one, COLUMNS, call_record, (), lineage, signature, since, identity)
            events: list[Event] = []
            if found is not None and found.state is not CallState.FAILED:
                passing = confirmed is not None and (found.workflow, found.seq) == (confirmed.workflow, confirmed.seq)
                newest = newest_repeat_txn(one, found.workflow, found.seq) if passing else None
                if confirmed is None or newest is None or newest[0].get("action") != CONFIRM_ASKED:
                    return found, False
                events.append(confirmed)
            now = utc_now()
            workflow = lineage.head
            self.execute(INSERT_CALL, (workflow, seq, tool, arguments, signature, now, key, self.replica_id, identity))
            detail = chain.reserved_detail(tool, arguments, signature, key, identity)
            self.link_txn([*events, Event(workflow, "reserved", seq, detail, now)])
        return found, True


CONFIRM_ASKED = "confirm_asked"
"""The ``action`` of a repeat event that refused a repeat and asked for its confirmation (``repeat = "confirm"``)."""


def newest_repeat_txn(
    one: Callable[[str, tuple[Any, ...]], Sequence[Any] | None], workflow: str, seq: int
) -> tuple[dict[str, Any], str] | None:
    """The detail and time of the newest repeat event of call ``seq`` of ``workflow`` (None: it has none)."""
    row = one(
        "SELECT detail, at FROM events WHERE workflow_id = ? AND seq = ? AND kind = 'repeat' ORDER BY id DESC LIMIT 1",
        (workflow, seq),
    )
    if not row:
        return None
    return json.loads(row[0]), str(row[1])
