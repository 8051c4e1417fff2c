"""A row of the ``calls`` table: its columns as one SELECT list, and the ``CallRecord`` a row becomes."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord, CallState

COLUMNS = (
    "workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at, idempotency_key,"
    " replica_id, identity"
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
        identity=row[11],
    )


class Statements:
    """What the SQL journal's mixins (``Settlements``, ``RepeatGuard``) need of ``SqlJournal``: its connection's
    statements and transactions, and the hash chain's link step."""

    replica_id: str | None

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (see ``SqlJournal.execute``)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A durable write transaction (see ``SqlJournal.transaction``)."""

    @abstractmethod
    def link_txn(self, events: Sequence[Event]) -> None:
        """Link events onto their chains in the open transaction (see ``SqlJournal.link_txn``)."""
