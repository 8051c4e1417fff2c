"""A tool policy's repeat lookup: the journaled call of a lineage with a given identity, within a window.

A call's identity is its signature, or, where its tool's policy names the part of the arguments that counts
(``match`` / ``ignore``), the hash of that part, stored in the ``identity`` column (schema v5). One indexed read
per branch of the lineage (``calls_by_signature (workflow_id, signature, started_at)``, schema v4, or the partial
``calls_by_identity``), so it stays a handful of rows however long the journal. Among several matches the one
that decides is the newest call that happened (COMPLETED, its result not a tool error), else the newest PENDING
one, else the newest that did not do its work (FAILED, or a tool error): a call that did its work once is never
run again because a later attempt failed.

Where replicas share the journal the lookup is made again inside the transaction that reserves the new call
(``NoRepeat``, ``reserving.py``); this module is the lookup both use, and the read of a call's newest ``repeat``
event (whether a refused repeat awaits its confirmation).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from checkpoint_mcp.journal.base import Lineage
from checkpoint_mcp.journal.records import CallRecord, CallState

CONFIRM_ASKED = "confirm_asked"
"""The ``action`` of a repeat event that refused a repeat and asked for its confirmation (``repeat = "confirm"``)."""

_ORDER = (
    "CASE WHEN state = 'COMPLETED' AND tool_error = 0 THEN 0 WHEN state = 'PENDING' THEN 1 ELSE 2 END,"
    " started_at DESC, seq DESC"
)

One = Callable[[str, tuple[Any, ...]], Sequence[Any] | None]
"""Runs a query for one row (on the journal's connection, or inside the caller's transaction)."""


def rank(record: CallRecord) -> int:
    """How strongly ``record`` decides a repeat: 0 it happened, 1 it is PENDING, 2 it did not do its work."""
    if record.happened:
        return 0
    return 1 if record.state is CallState.PENDING else 2


def find_repeat(
    one: One,
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
    return min(newest_first, key=rank)  # min keeps the first (newest) of equal rank


def newest_repeat(one: One, workflow: str, seq: int) -> tuple[dict[str, Any], str] | None:
    """The detail and time of the newest repeat event of call ``seq`` of ``workflow`` (None: it has none)."""
    row = one(
        "SELECT detail, at FROM events WHERE workflow_id = ? AND seq = ? AND kind = 'repeat' ORDER BY id DESC LIMIT 1",
        (workflow, seq),
    )
    if not row:
        return None
    return json.loads(row[0]), str(row[1])
