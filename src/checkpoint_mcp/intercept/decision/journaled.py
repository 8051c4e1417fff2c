"""The check of the call's own place: what the journal holds at its sequence (or key) decides it (spec §3.4).

* A finished call with the same signature: ``Reply`` with its outcome (a replay; the upstream is not called).
* A finished call with another signature: ``Refuse`` as a divergence, or, under ``--on-divergence fork``, ``Fork``
  (the call goes on, on a branch that starts here).
* A PENDING call: in flight here or on a live replica (joined, where joins are on), or in doubt (settled by its
  tool's policy where it can be, else refused), as ``pending`` says.
* No row, but a call reserved here and not yet committed (another gateway session's): in flight.
* No row, but `checkpoint journal gc` removed finished rows up to here: ``Refuse`` (collected).
* No row: nothing to say; the checks after this one decide.
"""

from __future__ import annotations

import json
from typing import Any

from checkpoint_mcp.difference import json_difference
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.pending import in_doubt, in_flight_here
from checkpoint_mcp.intercept.decision.verdicts import Fork, Refuse, Reply, Step
from checkpoint_mcp.journal.base import Diverge, InDoubtAt, Proceed, decide
from checkpoint_mcp.journal.records import CallRecord
from checkpoint_mcp.refusals import Collected, Divergence
from checkpoint_mcp.wire import dumps


class JournaledCheck:
    """The row at the call's place: replay, divergence, in flight or in doubt, collected; or nothing."""

    def check(self, call: Call, facts: Facts) -> Step:
        """See the module's docstring."""
        record = facts.place.row
        if record is None:
            return _no_row(call, facts)
        decision = decide(record, call.signature)
        if isinstance(decision, Proceed):
            return None
        if isinstance(decision, InDoubtAt):
            return in_doubt(record, facts)
        if isinstance(decision, Diverge):
            if facts.on_divergence == "fork":
                return Fork(record)
            return Refuse(divergence(record, call, facts))
        return Reply(record)


def _no_row(call: Call, facts: Facts) -> Step:
    """Nothing is journaled at the call's place: a call reserved here and not yet committed, a place `gc`
    collected, or (nothing to say) a fresh one."""
    place = facts.place
    if place.seq is None:  # a fresh sequence of the shared counter: nothing can be there
        return None
    workflow, seq = place.lineage.branch_at(place.seq).workflow, place.seq
    if facts.running(workflow, seq) is not None:
        return in_flight_here(facts, workflow, seq, call.name)
    if place.collected:
        return Refuse(Collected(workflow=workflow, seq=seq, commands=facts.commands(workflow, seq)))
    return None


def divergence(record: CallRecord, call: Call, facts: Facts) -> Divergence:
    """The refusal of ``call`` at the place where ``record`` (another call, finished) is journaled."""
    journaled: dict[str, Any] = {"tool": record.tool, "signature": record.signature, "at": record.started_at}
    received: dict[str, Any] = {"tool": call.name, "signature": call.signature}
    difference: list[str] = []
    if record.tool != call.name:
        difference.append(f"tool: {dumps(record.tool)} → {dumps(call.name)}")
    if record.redacted or facts.redact:
        difference.append("arguments differ (not shown: --redact-args-in-journal)")
    else:
        old_arguments = json.loads(record.arguments)
        journaled["arguments"] = old_arguments
        received["arguments"] = call.arguments
        difference.extend(json_difference(old_arguments, call.arguments))
    commands = facts.commands(record.workflow, record.seq)
    return Divergence(
        workflow=record.workflow,
        seq=record.seq,
        journaled=journaled,
        received=received,
        difference=difference or ["arguments differ"],
        commands={"show": commands["show"], "release": commands["release"]},
    )
