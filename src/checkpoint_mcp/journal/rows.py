"""A row of the ``calls`` table: its columns as one SELECT list, the ``CallRecord`` a row becomes, and the two
statements every journaled call runs (its PENDING row, then its outcome)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallRecord, CallState

COLUMNS = (
    "workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at, idempotency_key,"
    " replica_id, identity, tool_error, repeat_rule, rule"
)
"""Every column of ``calls``, in the order ``record`` reads them."""

INSERT_CALL = (
    "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, started_at, idempotency_key, replica_id,"
    " identity, repeat_rule, rule) VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?)"
)
"""A PENDING row: (workflow, seq, tool, arguments, signature, started_at, key, replica, identity, repeat_rule,
rule)."""


def insert_params(workflow: str, seq: int, call: NewCall, now: str, replica: str | None) -> tuple[Any, ...]:
    """``INSERT_CALL``'s parameters for ``call`` reserved at ``seq`` of ``workflow`` at ``now`` by ``replica``."""
    return (
        workflow,
        seq,
        call.tool,
        call.arguments,
        call.signature,
        now,
        call.key,
        replica,
        call.identity,
        call.repeat_rule,
        call.rule,
    )


FINISH_CALL = (
    "UPDATE calls SET state = ?, outcome = ?, finished_at = ?, tool_error = ?"
    " WHERE workflow_id = ? AND seq = ? AND state = 'PENDING'"
)
"""A PENDING row's outcome: (state, outcome, finished_at, tool_error, workflow, seq); nothing if no longer PENDING."""


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
        identity=row[11],
        tool_error=bool(row[12]),
        repeat_rule=row[13],
        rule=row[14],
    )
