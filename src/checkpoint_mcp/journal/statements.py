"""What every part of the SQL journal builds on: its connection's statements and transactions, taking turns with
other writers, and linking events onto the hash chains.

``Statements`` is the journal (``base.Journal``) as its SQL parts see it. Each part is one of its subclasses,
written over these few hooks and nothing else: the conditional reservation (``reserving.Reserving``), the
settlements of in-doubt calls (``settlements.Settlements``), whose each workflow is (``principals.Principals``).
``sql.SqlJournal`` is all of them together, with the rest of the journal's SQL; ``sqlite.py`` and ``postgres.py``
implement the hooks, once per database. So an operation is declared once, in ``base.Journal``, and written once,
in the part that does it (dbos-transact-py's one ``SystemDatabase`` with a subclass per database).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.journal.chain import Event


class Cursor(Protocol):
    """What both drivers' cursors offer."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Statements(Journal):
    """The journal's connection, as the SQL parts use it (statements use ``?`` placeholders, which a database
    rewrites if its driver wants another style)."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement on the journal's connection (inside the open transaction, if any)."""

    @abstractmethod
    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per parameter tuple (inside the open transaction)."""

    @abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction, committed durably on exit; driver errors become ``JournalError``."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[None]:
        """Translate driver errors raised by reads outside a transaction."""

    def take_turns(self, *names: str) -> None:
        """Make writers that name the same thing take turns, until the transaction ends.

        SQLite needs nothing: a write transaction (BEGIN IMMEDIATE) already excludes every other writer.
        """

    def lock_workflow(self, workflow: str) -> None:
        """Make concurrent writers of ``workflow``'s chain take turns, until the transaction ends.

        SQLite needs nothing: a write transaction (BEGIN IMMEDIATE) already excludes every other writer.
        """

    def chain_heads(self, workflows: Sequence[str]) -> dict[str, str]:
        """Each workflow's newest link hash ("" for none), its writers locked out first (inside a transaction)."""
        for workflow in workflows:
            self.lock_workflow(workflow)
        return chain.heads_by_query(self.execute)(workflows)

    def link_txn(self, events: Sequence[Event]) -> None:
        """Link ``events`` onto their chains, inside the caller's transaction."""
        if events:
            self.insert_links(chain.append(events, self.audit_key, self.chain_heads))

    def insert_links(self, rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows of ``events`` (inside the caller's transaction)."""
        self.execute_many(chain.INSERT_LINK, rows)
