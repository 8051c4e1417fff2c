"""A tool policy's settlements of in-doubt calls, in portable SQL: take the row, record what was proved.

``Settlements`` is the part of the SQL journal that does it; see ``Journal.take_in_doubt`` and ``Journal.settle`` for
what they promise.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.journal import chain
from checkpoint_mcp.journal.base import ResolveAction
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.reserving import METERED_OF_CALL
from checkpoint_mcp.journal.rows import COLUMNS
from checkpoint_mcp.journal.rows import record as call_record
from checkpoint_mcp.journal.statements import Statements


class Settlements(Statements):
    """``take_in_doubt`` and ``settle`` over the SQL journal's connection: the part of ``SqlJournal`` that does them."""

    def take_in_doubt(self, workflow: str, seq: int) -> CallRecord | None:
        """See ``Journal.take_in_doubt``: mark the in-doubt PENDING call at ``seq`` as this process's."""
        with self.transaction():
            row = self.execute(f"SELECT {COLUMNS} FROM calls WHERE workflow_id = ? AND seq = ?", (workflow, seq))
            found = row.fetchone()
            if found is None:
                return None
            record = call_record(found)
            if record.state is not CallState.PENDING:
                return None
            seen = record.replica
            if seen == self.replica_id:
                return record
            if seen is not None and self.replica_alive(seen):
                return None
            # Compare-and-set on the replica seen: of two replicas racing for the row, one updates it.
            where = "replica_id IS NULL" if seen is None else "replica_id = ?"
            params: tuple[Any, ...] = (self.replica_id, workflow, seq) + (() if seen is None else (seen,))
            taken = self.execute(
                f"UPDATE calls SET replica_id = ? WHERE workflow_id = ? AND seq = ? AND state = 'PENDING' AND {where}",
                params,
            ).rowcount
        return record._replace(replica=self.replica_id) if taken == 1 else None

    def settle(
        self,
        workflow: str,
        seq: int,
        action: ResolveAction,
        outcome: str | None,
        by: str,
        evidence: str,
        *,
        keep_row: bool = False,
    ) -> bool:
        """See ``Journal.settle``: apply and audit a policy's settlement of a PENDING call this process took."""
        mine = "replica_id IS NULL" if self.replica_id is None else "replica_id = ?"
        key: tuple[Any, ...] = (workflow, seq) + (() if self.replica_id is None else (self.replica_id,))
        now = utc_now()
        with self.transaction():
            if action is ResolveAction.COMPLETED:
                changed = self.execute(
                    "UPDATE calls SET state = 'COMPLETED', outcome = ?, finished_at = ?, replica_id = NULL"
                    f" WHERE workflow_id = ? AND seq = ? AND state = 'PENDING' AND {mine}",
                    (outcome, now, *key),
                ).rowcount
            elif action is ResolveAction.RELEASED and keep_row:
                changed = self.execute(
                    f"SELECT count(*) FROM calls WHERE workflow_id = ? AND seq = ? AND state = 'PENDING' AND {mine}",
                    key,
                ).fetchone()[0]
            elif action is ResolveAction.RELEASED:
                changed = self.execute(
                    f"DELETE FROM calls WHERE workflow_id = ? AND seq = ? AND state = 'PENDING' AND {mine}", key
                ).rowcount
                self.execute(METERED_OF_CALL, (workflow, seq))  # it did not happen: it counts no more
            else:
                raise UsageError(f"a policy cannot settle a call as {action.value}")
            if int(changed) != 1:
                return False
            user, host = f"checkpoint ({by})", socket.gethostname()
            self.execute(
                "INSERT INTO resolutions (workflow_id, seq, action, previous_state, previous_outcome, outcome,"
                " resolved_by, host, at) VALUES (?, ?, ?, 'PENDING', NULL, ?, ?, ?, ?)",
                (workflow, seq, action.value, outcome if outcome is not None else evidence, user, host, now),
            )
            events = [Event(workflow, "settled", seq, _settled_detail(action, evidence, keep_row), now)]
            if not keep_row:  # the row changed, as by an operator's resolution: the chain's verifier follows it
                detail = {
                    "action": action.value,
                    "previous_state": "PENDING",
                    "previous_outcome": None,
                    "outcome": chain.text_digest(outcome),
                    "by": user,
                    "host": host,
                }
                events.append(Event(workflow, "resolved", seq, detail, now))
            self.link_txn(events)
        return True


def _settled_detail(action: ResolveAction, evidence: str, keep_row: bool) -> dict[str, Any]:
    """The ``settled`` event of a policy's settlement: its means, verdict and reason, and digests of what the probe
    was asked and answered (the event chain holds no arguments or results; the resolution row has them)."""
    found = json.loads(evidence)
    detail: dict[str, Any] = {
        "action": "sent again" if keep_row else action.value,
        "evidence": chain.text_digest(evidence),
    }
    for name in ("by", "verdict", "reason", "probe", "key", "via"):
        if name in found:
            detail[name] = found[name]
    return detail
