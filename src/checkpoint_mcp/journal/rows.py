"""A row of the ``calls`` table: its columns as one SELECT list, and the ``CallRecord`` a row becomes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkpoint_mcp.journal.base import CallRecord, CallState

COLUMNS = (
    "workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at, idempotency_key, replica_id"
)
"""Every column of ``calls``, in the order ``record`` reads them."""


def record(row: Sequence[Any]) -> CallRecord:
    """The ``CallRecord`` of a ``calls`` row selected with ``COLUMNS``."""
    return CallRecord(
        workflow=row[0],
        seq=int(row[1]),
        tool=row[2],
        arguments=row[3],
        signature=row[4],
        state=CallState(row[5]),
        outcome=row[6],
        started_at=row[7],
        finished_at=row[8],
        key=row[9],
        replica=row[10],
    )
