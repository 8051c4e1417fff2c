"""A tool policy's repeat lookup: the journaled call of a lineage with a given signature, within a window.

One indexed read per branch of the lineage (``calls_by_signature (workflow_id, signature, started_at)``, schema
v4), so it stays a handful of rows however long the journal. Among several matches the one that decides is the
newest COMPLETED call, else the newest PENDING one, else the newest FAILED one: a call that completed once is
never run again because a later attempt failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from checkpoint_mcp.journal.base import CallRecord, CallState, Lineage

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
