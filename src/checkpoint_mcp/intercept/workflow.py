"""What one process knows of a workflow's calls, shared by every interceptor that journals to it; the interceptor's
state beside its decision.

Where new calls go (the lineage, which a fork moves to a new branch, and the cursor that gives a call without a
sequence its own, or, where the workflow is shared, the journal's shared counter), which calls run here (reserved and
not yet finished: no row shows a call another gateway session reserved until its unit commits), and which 2026-07-28
calls await their client's input. It places a call before the decision; the checks (``decision/``) read it through
``Facts`` as ``KnownCalls`` and never change it; the interceptor changes it with what the decision said (the
reservation, a fork, a continued call) and as calls are answered and committed. A gateway's sessions of one workflow
share one ``Workflow``, so their calls take distinct sequences and see each other in flight.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from checkpoint_mcp import debug
from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.intercept.decision.call import KEY_META, SEQ_META, Call
from checkpoint_mcp.intercept.decision.facts import Place
from checkpoint_mcp.intercept.decision.verdicts import AwaitingInput, Claimed, Note
from checkpoint_mcp.intercept.policy import Repeat
from checkpoint_mcp.journal.base import MAX_CLIENT_SEQ, MAX_SEQ, Journal, Lineage, Ownership, UnitOfWork
from checkpoint_mcp.journal.conditions import Condition, NewCall, Reserved, Unmet
from checkpoint_mcp.journal.records import CallRecord
from checkpoint_mcp.refusals import InvalidCallParams, JournalWriteFailed, WorkflowSharedRefusal
from checkpoint_mcp.wire import dumps

logger = logging.getLogger(__name__)


class Workflow:
    """Sequences, calls in flight and calls awaiting input of one workflow, in one process."""

    def __init__(
        self,
        journal: Journal,
        lineage: Lineage,
        *,
        replay_from_start: bool = False,
        join_timeout: float | None = None,
        principal: str | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        """``join_timeout``: a call matching one in flight here (same sequence or key, same signature) joins it for
        up to that many seconds (`checkpoint serve`); None: it is refused as in flight (the stdio proxy).
        ``principal``: whose every call of this workflow is (`checkpoint serve --issuer`); None: nobody's.
        ``ownership``: the stdio proxy's claim on the workflow: while it is shared, calls take their sequences from
        the workflow's shared counter, and the first call that names its sequence makes it exclusive or is refused
        (docs/sessions.md); None (the gateway): the workflow is shared where the journal has replicas."""
        self.journal = journal
        self.join_timeout = join_timeout
        self.principal = principal
        self._ownership = ownership
        self._lineage = lineage
        self._committed_lineage = lineage
        # Rows above the clients' range (written by an older Checkpoint, which accepted any 64-bit sequence)
        # do not move the cursor: it keeps 2**63 - 2**53 sequences of room.
        highest = journal.max_seq(lineage, upto=MAX_CLIENT_SEQ)
        self._cursor = 1 if replay_from_start else highest + 1
        # Sequences from here on hold no row: a call the cursor places there needs no read. (Calls that name their
        # sequence push the cursor past it, so the cursor never revisits one this process used.)
        self._fresh_from = highest + 1
        self.awaiting: list[AwaitingInput] = []
        self.running: dict[tuple[str, int], str] = {}  # (workflow, seq) -> signature, until its outcome commits
        if self.sharing:
            journal.ready_seq(lineage.head)

    @property
    def lineage(self) -> Lineage:
        """Where new calls are journaled."""
        return self._lineage

    @property
    def cursor(self) -> int:
        """The sequence the next call without one of its own will take."""
        return self._cursor

    @property
    def sharing(self) -> bool:
        """True while other live processes may write this workflow's calls too (replicas, or proxies whose calls are
        identified by content): sequences come from the shared counter."""
        if self._ownership is not None:
            return self._ownership.shared
        return self.journal.replica_id is not None

    @property
    def shared(self) -> bool:
        """True where the workflow is shared and its lineage is committed: a decision that read the journal must be
        tested again inside the reservation (another process may have written meanwhile)."""
        return self.sharing and self._lineage == self._committed_lineage

    # ---- placing ----------------------------------------------------------------------------------------------

    def place(self, call: Call, unit: UnitOfWork) -> Place:
        """Where ``call`` goes: its key's row, its sequence, or a fresh one (the cursor's next; where the workflow is
        shared, the next of its shared counter), taken only if the call is reserved, and the row that counts there.

        Raises:
            InvalidCallParams: the key is journaled at another sequence than the one named, or no sequence is left.
            WorkflowSharedRefusal: the call names its sequence, and other live proxies share the workflow.
            JournalError: the journal could not be read.
        """
        if call.seq is not None and self._ownership is not None and self._ownership.shared:
            self._own_alone(call)
        lineage = self._lineage
        if call.key is not None:
            record = unit.read_key(lineage, call.key)
            if record is not None:
                if call.seq is not None and call.seq != record.seq:
                    journaled = f"is journaled at sequence {record.seq}, not {call.seq}"
                    raise InvalidCallParams(
                        f"invalid params: {KEY_META} {call.key!r} {journaled}",
                        {"reason": "key_sequence_mismatch", "key": call.key, "seq": record.seq, "received": call.seq},
                    )
                self._cursor = max(self._cursor, record.seq + 1)
                return Place(lineage, record.seq, record)
        if call.seq is not None:
            self._cursor = max(self._cursor, call.seq + 1)
            return Place(lineage, call.seq, unit.read(lineage, call.seq))
        if self.sharing:
            return Place(lineage, None, None)  # a sequence no other process holds: taken when reserved
        seq = self._cursor
        if seq > MAX_SEQ:
            raise InvalidCallParams(
                f"invalid params: workflow {lineage.head!r} has used every sequence up to {MAX_SEQ}; "
                f"name one with _meta.{SEQ_META}",
                {"reason": "sequences_exhausted"},
            )
        record = unit.read(lineage, seq) if seq < self._fresh_from or seq > MAX_CLIENT_SEQ else None
        if record is not None:
            self._cursor = seq + 1  # a journaled step, replayed or refused: the next call takes the next one
        return Place(lineage, seq, record)

    def _own_alone(self, call: Call) -> None:
        """A call names its sequence: from now on this process must own the workflow alone (another's call could
        take the sequence meant for it); the cursor then counts on from every call the others journaled.

        Raises:
            WorkflowSharedRefusal: other live proxies share the workflow.
            JournalLost: the share was lost on the way.
        """
        assert self._ownership is not None
        assert call.seq is not None
        if not self._ownership.take_alone():
            raise WorkflowSharedRefusal(workflow=self._lineage.root, tool=call.name, seq=call.seq)
        self.journal.give_back()  # the cursor numbers the calls from now on
        highest = self.journal.max_seq(self._lineage, upto=MAX_CLIENT_SEQ)
        self._cursor = max(self._cursor, highest + 1)
        self._fresh_from = max(self._fresh_from, highest + 1)
        logger.info("workflow %r is now this proxy's alone: a call names its sequence", self._lineage.root)

    def forked(self, unit: UnitOfWork, branched: Lineage) -> None:
        """A call diverged: new calls go to the branch the decision named, the head of ``branched`` (created when
        ``unit`` commits)."""
        parent, seq = self._lineage, branched.branches[0].start
        unit.fork(branched)
        self._lineage = branched
        self._cursor = seq + 1  # the branch's history ends with this call
        self._fresh_from = seq + 1
        logger.warning(
            "call #%d diverged from workflow %r: continuing on the new branch %r", seq, parent.head, self.head
        )

    @property
    def head(self) -> str:
        """The workflow new calls are written to."""
        return self._lineage.head

    # ---- reserving --------------------------------------------------------------------------------------------

    def reserve(
        self,
        call: Call,
        place: Place,
        redact: bool,
        conditions: list[Condition],
        notes: list[Note],
        unit: UnitOfWork,
    ) -> Claimed | Unmet:
        """Reserve ``call`` at ``place`` (``redact``: its arguments are not journaled): in ``unit`` when nothing is
        to be tested, else durably now under ``conditions`` (``Journal.reserve``); ``notes`` go with it.

        Raises:
            JournalError: the journal could not be read or written (nothing was reserved).
        """
        new = NewCall(
            call.name, call.stored(redact), call.signature, call.key, call.identity, _repeat_rule(call), call.decided_by
        )
        workflow, seq = place.lineage.head, place.seq
        allocated = seq is None
        if seq is None:
            seq = self.journal.allocate_seq(workflow) or self._cursor  # the journal has a counter where it is shared
        durable, approval = False, None
        if conditions:
            reserved = self.journal.reserve(place.lineage, seq, new, conditions)
            if isinstance(reserved, Unmet):
                if allocated:
                    self.journal.put_back(workflow, seq)  # a refused call takes no sequence
                return reserved
            assert isinstance(reserved, Reserved)
            durable, approval = True, reserved.approval
            if approval is not None:
                logger.info("call %s runs on approval #%d of %r", call.name, approval, workflow)
                debug.trigger("after_approval_used")  # crash tests: used and reserved, not yet sent upstream
        else:
            unit.reserve(workflow, seq, new)
        for note in notes:
            unit.record_event(note.workflow, note.kind, note.seq, note.detail)
        self._cursor = max(self._cursor, seq + 1)
        self.running[(workflow, seq)] = call.signature
        return Claimed(workflow, seq, call.name, call.signature, key=call.key, durable=durable, approval=approval)

    def settling(self, record: CallRecord) -> Claimed:
        """The in-doubt call ``record`` is being settled by this process: in flight here until ``finished``."""
        self.running[(record.workflow, record.seq)] = record.signature
        return Claimed(record.workflow, record.seq, record.tool, record.signature, continued=True, key=record.key)

    def awaiting_input(self, claimed: Claimed, request_state: Any) -> None:
        """The call answered ``input_required``: its row stays PENDING until the client's retry completes it."""
        self.awaiting.append(AwaitingInput(claimed, request_state if isinstance(request_state, str) else None))

    def continued(self, awaiting: AwaitingInput) -> Claimed:
        """The retry of ``awaiting`` goes on: the same journal entry, no longer awaiting."""
        self.awaiting.remove(awaiting)
        return awaiting.claimed._replace(continued=True)

    def finished(self, claimed: Claimed) -> None:
        """The call is no longer running in this process (its outcome, if any, is committed)."""
        self.running.pop((claimed.workflow, claimed.seq), None)

    # ---- the unit of work's fate --------------------------------------------------------------------------------

    def savepoint(self) -> tuple[Any, ...]:
        """What ``restore`` needs to undo the claims made from here on (before their unit commits)."""
        return (self._lineage, self._cursor, self._fresh_from, self.awaiting[:] if self.awaiting else None)

    def restore(self, savepoint: tuple[Any, ...], claimed: Claimed | None) -> None:
        """Undo what happened since ``savepoint``: a line whose routing failed must not touch its neighbours."""
        self._lineage, self._cursor, self._fresh_from, awaiting = savepoint
        self.awaiting = awaiting or []
        if claimed is not None and not claimed.continued:
            self.running.pop((claimed.workflow, claimed.seq), None)
            self._withdraw(claimed)

    def committed(self, lineage: Lineage | None = None) -> None:
        """The unit of work committed: its branch (if it forked) is now where calls go. ``lineage``: where calls
        went when its batch was taken (a later batch, still uncommitted, may have forked since)."""
        self._committed_lineage = lineage if lineage is not None else self._lineage

    def rolled_back(self, claims: list[Claimed]) -> None:
        """The unit of work failed: forget its reservations and any branch it started."""
        self._lineage = self._committed_lineage
        for claimed in claims:
            self.running.pop((claimed.workflow, claimed.seq), None)
            self._withdraw(claimed)

    def _withdraw(self, claimed: Claimed) -> None:
        """A call reserved durably at claim whose unit of work then failed was never sent: its row becomes FAILED
        (the upstream never saw it), where the journal can still be written; else it stays PENDING, in doubt."""
        if not claimed.durable:
            return
        unit = self.journal.unit()
        refusal = JournalWriteFailed(workflow=claimed.workflow, seq=claimed.seq, tool=claimed.tool, cause="not sent")
        unit.withdraw(claimed.workflow, claimed.seq, dumps(refusal.to_error()))
        with contextlib.suppress(JournalError):
            unit.commit()


def _repeat_rule(call: Call) -> str | None:
    """What the journal keeps of the call's repeat rule (``NewCall.repeat_rule``), which the resume brief tells:
    ``refuse``, ``replay`` or ``confirm``; ``allow`` where a policy says its repeats run (written for it, or an
    idempotent tool); None where no policy says anything of its repeats (the brief then lists it as done)."""
    rule = call.rule
    if rule.repeats_run:
        return "allow"
    return None if rule.repeat is Repeat.ALLOW else rule.repeat.value
