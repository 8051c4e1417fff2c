"""A tool policy's repeat lookup: the journaled call of a lineage with a given signature, within a window.

One indexed read per branch of the lineage (``calls_by_signature (workflow_id, signature, started_at)``, schema
v4), so it stays a handful of rows however long the journal. Among several matches the one that decides is the
newest COMPLETED call, else the newest PENDING one, else the newest FAILED one: a call that completed once is
never run again because a later attempt failed.

Where replicas share the journal, the lookup and the reservation of a new call must be one step, else two
replicas that receive the same call within a few milliseconds both find nothing and both run it.
``RepeatGuard.reserve_unless_repeat`` makes them one transaction that first takes a lock on the call's
(lineage, signature) (``lock_signature``: a transaction-scoped advisory lock on PostgreSQL; nothing on SQLite,
whose write transaction already excludes every other writer): the second replica waits for the first's commit and
then finds its PENDING row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.base import CallRecord, CallState, Lineage, utc_now
from checkpoint_mcp.journal.chain import Event
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
) -> CallRecord | None:
    """The row that decides a repeat: ``one`` runs a query for one row, ``pending`` are the unit's own rows."""
    waiting = [row for row in pending if row.signature == signature and row.started_at >= since]
    found: list[CallRecord] = []
    for branch, start, limit in lineage.ranges():
        found.extend(
            row
            for row in waiting
            if row.workflow == branch.workflow and row.seq >= start and (limit is None or row.seq < limit)
        )
        sql = f"SELECT {columns} FROM calls WHERE workflow_id = ? AND signature = ? AND started_at >= ? AND seq >= ?"
        params: tuple[Any, ...] = (branch.workflow, signature, since, start)
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
    "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at, idempotency_key, replica_id)"
    " VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?)"
)


def signature_lock_key(root: str, signature: str) -> int:
    """The advisory lock id of one signature in one lineage: 64 bits of SHA-256, as a signed bigint."""
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
    ) -> tuple[CallRecord | None, bool]:
        """Look the signature up and, unless a COMPLETED or PENDING call has it, reserve the call at ``seq`` of
        the lineage's head: one durable transaction, serialized per (lineage, signature) (see
        ``Journal.reserve_unless_repeat``). Returns the row that decides the repeat (None: none) and whether the
        call was reserved.

        Raises:
            JournalError: the journal could not be read or written (nothing was reserved).
        """
        with self.transaction():
            self.lock_signature(lineage.root, signature)

            def one(sql: str, params: tuple[Any, ...]) -> Any:
                return self.execute(sql, params).fetchone()

            found = find_repeat(one, COLUMNS, call_record, (), lineage, signature, since)
            if found is not None and found.state is not CallState.FAILED:
                return found, False
            now = utc_now()
            workflow = lineage.head
            self.execute(INSERT_CALL, (workflow, seq, tool, arguments, signature, now, key, self.replica_id))
            detail = chain.reserved_detail(tool, arguments, signature, key)
            self.link_txn([Event(workflow, "reserved", seq, detail, now)])
        return found, True
