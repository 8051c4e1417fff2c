"""Whose a workflow is: the record `checkpoint serve` keeps when tokens from an identity provider name principals.

A principal's workflows are journaled under ids of their own (``gateway/principals.py`` says how they are made);
before the first call of one is journaled, the gateway records which principal it belongs to in the workflow's own
row (``workflows.principal``, schema version 7), inserting that row if the journal has none. The first record of a
workflow wins (its id is the table's key) and is never changed, so every replica of a fleet maps a workflow to the
same principal, whatever order their requests come in; a workflow recorded as another principal's, or one the
journal has with no principal (journaled by a stdio proxy, or a gateway without tokens), is refused, never
shared. ``Principals`` is the part of the SQL journal that keeps the record.
"""

from __future__ import annotations

import logging

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import WorkflowOfAnother
from checkpoint_mcp.journal.statements import Statements

logger = logging.getLogger(__name__)

_RECORD = (
    "INSERT INTO workflows (workflow_id, root_id, created_at, principal) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (workflow_id) DO NOTHING"
)
_WHOSE = "SELECT principal FROM workflows WHERE workflow_id = ?"
_RECORDED = "SELECT workflow_id, principal FROM workflows WHERE principal IS NOT NULL"


class Principals(Statements):
    """The ``workflows.principal`` column over the SQL journal's connection: the part of ``SqlJournal`` that keeps
    it."""

    def claim_workflow(self, workflow: str, principal: str, requested: str, upstream: str | None = None) -> None:
        """See ``Journal.claim_workflow``: record ``workflow`` as ``principal``'s (``requested``, ``upstream``:
        what it was asked for as, for the log), unless it already is; one durable transaction.

        Raises:
            WorkflowOfAnother: the journal records it as another principal's, or has it without any.
            JournalError: the journal cannot be read or written.
        """
        with self.transaction():
            found = self.execute(_WHOSE, (workflow,)).fetchone()
            if found is None:
                self.execute(_RECORD, (workflow, workflow, utc_now(), principal))
                found = self.execute(_WHOSE, (workflow,)).fetchone()
            if found is None or found[0] != principal:  # NULL: journaled by no principal (a stdio proxy, say)
                raise WorkflowOfAnother(workflow)
        logger.debug("workflow %r is %r's (asked for as %r at %s)", workflow, principal, requested, upstream or "-")

    def principals(self) -> dict[str, str]:
        """See ``Journal.principals``: every workflow recorded as a principal's, and that principal."""
        with self.reading():
            rows = self.execute(_RECORDED).fetchall()
        return {str(workflow): str(principal) for workflow, principal in rows}
