"""A PENDING row met by a call: the same call still running (joined, where joins are on), a different one in
flight, or a call in doubt (settled by its tool's policy where it can be, else refused).

Whichever check meets the row (at the call's sequence or key, or as the call's repeat by content) asks here, so
that "in flight" and "in doubt" mean the same everywhere: in flight while this process or a live replica (another
session's proxy sharing the workflow, a gateway replica) runs it, in doubt once no live process does.
"""

from __future__ import annotations

from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.verdicts import Join, Note, Refuse, Settle
from checkpoint_mcp.intercept.settle_rules import can_settle
from checkpoint_mcp.journal.records import CallRecord
from checkpoint_mcp.refusals import InDoubt, StillInFlight


def joined(facts: Facts, workflow: str, seq: int, tool: str) -> Join | None:
    """A ``Join`` of the call running here at ``seq`` of ``workflow`` when it is this very call and joins are on."""
    timeout = facts.join_timeout
    if timeout is None or facts.running(workflow, seq) != facts.call.signature:
        return None
    commands = facts.commands(workflow, seq)
    return Join(workflow, seq, StillInFlight(workflow=workflow, seq=seq, tool=tool, waited=timeout, commands=commands))


def in_flight_here(facts: Facts, workflow: str, seq: int, tool: str) -> Join | Refuse:
    """A call reserved here at ``seq`` of ``workflow`` and not yet committed (no row shows it yet: another gateway
    session's unit of work holds it): joined where it is this very call and joins are on, else in flight."""
    join = joined(facts, workflow, seq, tool)
    if join is not None:
        return join
    commands = facts.commands(workflow, seq)
    return Refuse(
        InDoubt(workflow=workflow, seq=seq, tool=tool, journaled_at="", commands=commands, in_flight_here=True)
    )


def pending(found: CallRecord, facts: Facts) -> Join | InDoubt:
    """What a PENDING ``found`` is to this call: the same call in flight here or on a live replica, joined where
    joins are on; else the refusal that says in flight (here, or on that replica) or in doubt."""
    workflow, seq = found.workflow, found.seq
    join = joined(facts, workflow, seq, found.tool)
    if join is not None:
        return join
    replica = found.replica
    elsewhere = replica is not None and facts.replica_alive(replica)
    timeout = facts.join_timeout
    if elsewhere and timeout is not None and found.signature == facts.call.signature:
        commands = facts.commands(workflow, seq)
        refusal = StillInFlight(workflow=workflow, seq=seq, tool=found.tool, waited=timeout, commands=commands)
        return Join(workflow, seq, refusal)
    return InDoubt(
        workflow=workflow,
        seq=seq,
        tool=found.tool,
        journaled_at=found.started_at,
        commands=facts.commands(workflow, seq),
        in_flight_here=facts.running(workflow, seq) is not None,
        replica=replica if elsewhere else None,
    )


def in_doubt(found: CallRecord, facts: Facts) -> Join | Settle | Refuse:
    """A PENDING ``found``, as ``pending`` says, settled where it can be (``settled``)."""
    met = pending(found, facts)
    return met if isinstance(met, Join) else settled(found, met, facts)


def settled(found: CallRecord, refusal: InDoubt, facts: Facts, notes: tuple[Note, ...] = ()) -> Settle | Refuse:
    """``Settle`` where ``found`` is truly in doubt (no live process runs it), is this same call, and its tool's
    policy declares a way to settle it (a probe, an idempotency key, or an idempotent tool); else ``refusal``."""
    rule = facts.rule_for(found.tool)
    truly = refusal.data.get("reason") == "in_doubt"
    if truly and found.signature == facts.call.signature and can_settle(rule):
        return Settle(found, rule, refusal, notes)
    return Refuse(refusal, notes)
