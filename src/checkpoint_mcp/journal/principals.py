"""Whose a workflow is: the record `checkpoint serve` keeps when tokens from an identity provider name principals.

A principal's workflows are journaled under ids of their own (``gateway/principals.py`` says how they are made);
before the first call of one is journaled, the gateway records here which principal it belongs to, which id the
principal asked for, and which upstream it journals (behind ``--upstreams``). The first record of a workflow wins
(its id is the table's key) and is never changed, so every replica of a fleet maps a workflow to the same principal,
whatever order their requests come in; a workflow recorded as another principal's, or one journaled before anyone
recorded it (no principal had it), is refused, never shared. ``SqlJournal`` inherits these (a mixin, as
``Settlements``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from checkpoint_mcp.errors import WorkflowOfAnother
from checkpoint_mcp.journal.base import utc_now
from checkpoint_mcp.journal.rows import Statements

_RECORD = (
    "INSERT INTO workflow_principals (workflow_id, principal, requested, upstream, created_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (workflow_id) DO NOTHING"
)
_KNOWN = "SELECT 1 FROM workflows WHERE workflow_id = ? UNION ALL SELECT 1 FROM calls WHERE workflow_id = ? LIMIT 1"


class PrincipalStore(Statements):
    """The ``workflow_principals`` table over the SQL journal's connection (a mixin of ``SqlJournal``)."""

    reading: Callable[[], AbstractContextManager[None]]  # ``SqlJournal.reading``

    def claim_workflow(self, workflow: str, principal: str, requested: str, upstream: str | None = None) -> None:
        """Record ``workflow`` as ``principal``'s (asked for as ``requested``), unless it is already; one durable
        transaction.

        Raises:
            WorkflowOfAnother: the journal records it as another principal's, or has journaled it without any.
            JournalError: the journal cannot be read or written.
        """
        with self.transaction():
            row = self.execute("SELECT principal FROM workflow_principals WHERE workflow_id = ?", (workflow,))
            found = row.fetchone()
            if found is None:
                if self.execute(_KNOWN, (workflow, workflow)).fetchone() is not None:
                    raise WorkflowOfAnother(workflow)  # journaled by no principal (a stdio proxy, say): not theirs
                self.execute(_RECORD, (workflow, principal, requested, upstream, utc_now()))
                found = self.execute(
                    "SELECT principal FROM workflow_principals WHERE workflow_id = ?", (workflow,)
                ).fetchone()
            if found is None or found[0] != principal:
                raise WorkflowOfAnother(workflow)

    def principals(self) -> dict[str, str]:
        """Every recorded workflow and the principal it belongs to."""
        with self.reading():
            rows = self.execute("SELECT workflow_id, principal FROM workflow_principals").fetchall()
        return {str(workflow): str(principal) for workflow, principal in rows}
