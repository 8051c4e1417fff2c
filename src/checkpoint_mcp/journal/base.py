"""The journal's vocabulary: call states and records, lineage, the decision table, and the store interface.

Everything here is pure except ``Journal`` and ``UnitOfWork``, the abstract store, which declare each operation
once. ``sql.py`` implements them once in portable SQL, with the parts it is made of (``reserving.py``,
``settlements.py``, ``principals.py``, over one base: ``statements.py``); ``sqlite.py`` and ``postgres.py`` hold only
what differs between the two databases.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from checkpoint_mcp.journal.approval_rows import Approval
from checkpoint_mcp.journal.chain import Link
from checkpoint_mcp.journal.conditions import Condition, NewCall, Reservation
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.session_starts import SessionStarts

MAX_KEY_LENGTH = 256
"""The longest ``_meta.checkpoint_key`` (or ``idempotencyKey``) accepted."""

MAX_CLIENT_SEQ = 2**53 - 1
"""The highest ``_meta.checkpoint_seq`` a client may name: the largest integer every JSON implementation reads
exactly. The journal's columns hold 64-bit integers, so the cursor, which counts on from the highest sequence
used, has 2**63 - 2**53 sequences of room above any client's choice and can never run out in practice."""

MAX_SEQ = 2**63 - 1
"""The highest sequence either database can store (a signed 64-bit integer)."""


class Branch(NamedTuple):
    """One workflow of a lineage: its own rows count from sequence ``start`` on."""

    workflow: str
    start: int  # 1 for a root; the fork sequence for a branch
    collected_through: int = 0  # `gc` removed finished rows up to this sequence


class Lineage(NamedTuple):
    """The workflow a proxy writes to (the head) and the branches it inherits from, newest first.

    A branch forked from its parent at sequence N shares the parent's calls below N and has its own from N on;
    the parent is never altered. The last branch is the root, whose rows count from 1.
    """

    branches: tuple[Branch, ...]

    @property
    def head(self) -> str:
        """The workflow new calls are written to."""
        return self.branches[0].workflow

    @property
    def root(self) -> str:
        """The workflow id the lineage started from (what ``--workflow-id`` names)."""
        return self.branches[-1].workflow

    def branch_at(self, seq: int) -> Branch:
        """The branch whose row counts at ``seq``."""
        for branch in self.branches:
            if branch.start <= seq:
                return branch
        return self.branches[-1]

    def ranges(self) -> list[tuple[Branch, int, int | None]]:
        """Each branch with the half-open range of sequences it contributes: (branch, from, to or None)."""
        out: list[tuple[Branch, int, int | None]] = []
        limit: int | None = None
        for branch in self.branches:
            out.append((branch, branch.start, limit))
            limit = branch.start if limit is None else min(limit, branch.start)
        return out


def lineage_from_rows(workflow: str, rows: Sequence[Sequence[Any]]) -> Lineage:
    """The lineage ``workflow`` writes to, from its tree's ``workflows`` rows.

    Each row is (workflow_id, parent_id, fork_seq, created_at, collected_through); the newest workflow among
    ``workflow`` and its descendants is the head, where calls go on.
    """
    by_id = {row[0]: row for row in rows}
    if workflow not in by_id:
        return Lineage((Branch(workflow, 1),))
    children: dict[str, list[str]] = {}
    for row in rows:
        if row[1] is not None:
            children.setdefault(row[1], []).append(row[0])
    subtree, stack = [], [workflow]
    while stack:
        current = stack.pop()
        subtree.append(current)
        stack.extend(children.get(current, []))
    head = max(subtree, key=lambda w: (by_id[w][3], w))
    branches: list[Branch] = []
    current_id: str | None = head
    while current_id is not None:
        row = by_id[current_id]
        branches.append(Branch(row[0], int(row[2]) if row[2] is not None else 1, int(row[4])))
        current_id = row[1]
    return Lineage(tuple(branches))


class OwnerInfo(NamedTuple):
    """Who owns a workflow: the live proxy (or operator command) holding its lock."""

    pid: int
    host: str
    since: str
    command: str = "checkpoint"

    def describe(self) -> str:
        """``pid 4242 on host-a since 2026-…Z (checkpoint)`` (a database session whose process is unknown: ``a
        session from host-a since …``)."""
        if self.pid == 0:
            return f"a session from {self.host} since {self.since} ({self.command})"
        return f"pid {self.pid} on {self.host} since {self.since} ({self.command})"


def described(owners: Sequence[OwnerInfo]) -> str:
    """``pid 1 on h since … (checkpoint), pid 2 …``, or "another live proxy" when none can be named."""
    return ", ".join(owner.describe() for owner in owners) or "another live proxy"


class WorkflowSummary(NamedTuple):
    """One workflow as `checkpoint journal ls` shows it."""

    workflow: str
    root: str
    parent: str | None
    fork_seq: int | None
    created_at: str
    counts: dict[CallState, int]
    last_activity: str | None = None
    owner: OwnerInfo | None = None
    principal: str | None = None  # whose it is (`checkpoint serve` with an identity provider), if anyone's
    sharers: tuple[OwnerInfo, ...] = ()  # the live proxies that share it (no owner then), as far as can be told


class ResolveAction(enum.Enum):
    """What an operator decided about a PENDING or FAILED call."""

    COMPLETED = "completed"  # it ran: replays return the given result
    FAILED = "failed"  # it failed: replays return the given error
    RELEASED = "released"  # forget it: the next call at that sequence runs again (a decision to re-execute)


class Resolution(NamedTuple):
    """The audit record of one `checkpoint journal resolve`."""

    workflow: str
    seq: int
    action: ResolveAction
    previous_state: CallState
    previous_outcome: str | None
    outcome: str | None
    user: str
    host: str
    at: str


class Proceed(NamedTuple):
    """No row at this sequence: reserve PENDING, then call the upstream."""


class Replay(NamedTuple):
    """A finished call with the same signature: answer from the journal, do not call the upstream."""

    record: CallRecord


class Diverge(NamedTuple):
    """A finished call with another signature: refuse (or fork)."""

    record: CallRecord


class InDoubtAt(NamedTuple):
    """A PENDING row: the call may or may not have run; refuse until an operator reconciles it."""

    record: CallRecord


Decision = Proceed | Replay | Diverge | InDoubtAt

PROCEED = Proceed()


def decide(record: CallRecord | None, signature: str) -> Decision:
    """The decision table of spec §3.4 (with FAILED rows replayed like COMPLETED ones)."""
    if record is None:
        return PROCEED
    if record.state is CallState.PENDING:
        return InDoubtAt(record)
    if record.signature != signature:
        return Diverge(record)
    return Replay(record)


class Batch(NamedTuple):
    """The writes a unit of work gave up for one commit (``UnitOfWork.take``), written by ``Journal.write_batch``
    on any connection to the journal (a committer thread's, say), then handed back to ``UnitOfWork.settled``."""

    groups: list[Any]  # the statements, in the journal's own form
    durable: bool  # False: outcomes only, under ``--relaxed-completions``
    overlay: Any  # what the unit keeps showing to reads until the batch is settled


class UnitOfWork(ABC):
    """The journal writes of one turn of the proxy, made durable together by ``commit``.

    Writes are recorded, not executed, until ``commit``; reads see the journal as committed plus this unit's
    own pending writes. Nothing a caller does with a pending write may reach the outside world before
    ``commit`` returns.
    """

    @abstractmethod
    def read(self, lineage: Lineage, seq: int) -> CallRecord | None:
        """The row that counts at ``seq`` in ``lineage``, this unit's pending rows included."""

    @abstractmethod
    def read_key(self, lineage: Lineage, key: str) -> CallRecord | None:
        """The row that counts for idempotency key ``key`` in ``lineage``, or None."""

    @abstractmethod
    def read_signature(
        self, lineage: Lineage, signature: str, since: str, identity: str | None = None
    ) -> CallRecord | None:
        """The row of ``lineage`` with ``signature`` (with ``identity``, when given: its tool's policy names the
        part of the arguments that counts) started at ``since`` or later, this unit's pending rows included (a
        tool policy's repeat lookup). Among several: the newest COMPLETED one, else the newest PENDING one, else
        the newest FAILED one, so that a call that completed once is never run again."""

    @abstractmethod
    def newest_repeat(self, workflow: str, seq: int) -> tuple[dict[str, Any], str] | None:
        """The detail and time of the newest ``repeat`` event of call ``seq`` of ``workflow``, this unit's queued
        events included (None: it has none): whether a refused repeat awaits its confirmation."""

    @abstractmethod
    def reserve(self, workflow: str, seq: int, call: NewCall) -> None:
        """Insert ``call``'s PENDING row at ``seq`` of ``workflow`` (at commit): a reservation under no condition."""

    @abstractmethod
    def finish(self, workflow: str, seq: int, state: CallState, outcome: str, tool_error: bool = False) -> None:
        """Move a PENDING row to COMPLETED or FAILED (at commit); ``tool_error``: a COMPLETED result that is a tool
        error (``isError: true``)."""

    @abstractmethod
    def disown(self, workflow: str, seq: int) -> None:
        """The replica that reserved this PENDING call gives it up (its exchange broke): in doubt for everyone."""

    @abstractmethod
    def withdraw(self, workflow: str, seq: int, outcome: str) -> None:
        """A PENDING call that was never sent (reserved at claim, then its unit of work failed): FAILED with
        ``outcome`` (at commit), and no longer counted towards a limit or budget."""

    @abstractmethod
    def branch(self, lineage: Lineage, seq: int) -> Lineage:
        """The lineage a branch of ``lineage`` started at ``seq`` would make (its new head named, nothing written):
        what ``fork`` records."""

    @abstractmethod
    def fork(self, branched: Lineage) -> None:
        """Start the branch ``branch`` named, the head of ``branched`` (created at commit)."""

    @abstractmethod
    def record_event(self, workflow: str, kind: str, seq: int | None, detail: Mapping[str, Any]) -> None:
        """Append an event to ``workflow``'s hash chain at commit, with this unit's other writes.

        ``kind`` names what happened (``repeat``, ``settled``, ``replayed``…); ``detail`` is a JSON object,
        stored as its canonical JSON (never put arguments or results in it: digests, ids, reasons).

        Raises:
            ValueError: ``detail`` has no canonical JSON form.
        """

    @property
    @abstractmethod
    def empty(self) -> bool:
        """True when nothing is waiting to be written."""

    @abstractmethod
    def mark(self) -> int:
        """A point to come back to with ``rollback_to``: the writes recorded so far."""

    @abstractmethod
    def rollback_to(self, mark: int) -> None:
        """Forget the writes recorded since ``mark`` (they were never sent anywhere)."""

    @abstractmethod
    def take(self, relaxed: bool = False) -> Batch | None:
        """Everything recorded, as one batch to write, and start over empty (None when nothing is recorded).

        Until ``settled``, reads still see the batch's rows (its commit may be running on another thread), and
        new writes accumulate for the next batch. ``relaxed`` as for ``commit``.
        """

    @abstractmethod
    def settled(self, batch: Batch) -> None:
        """``batch`` was written, or failed: reads stop seeing its rows in this unit (now they are in the journal,
        or nowhere)."""

    @abstractmethod
    def commit(self, relaxed: bool = False) -> None:
        """Write everything recorded, durably, in one transaction, and start over empty.

        ``relaxed`` (``--relaxed-completions``, SQLite only): when everything recorded is an outcome (no PENDING
        row, no branch), the commit need only survive a crash of this process, not a power loss: such a lost
        outcome leaves its call PENDING, in doubt, never re-run. A unit holding a PENDING row is always durable.

        Raises:
            JournalUnavailable: nothing was written (or, if the connection broke during COMMIT, possibly
                everything: its PENDING rows are then in doubt, which is safe).
            JournalLost: the journal is gone for good.
        """


class Approvals(ABC):
    """A journal's approval requests (schema v6, ``approval_rows.py``): asked for a call, decided by a person, used by
    the reservation of that call (``Journal.reserve`` under ``UsesApproval``), or expired. Each step is one durable
    transaction, chained on the workflow's hash chain."""

    @abstractmethod
    def approval(self, approval_id: int) -> Approval | None:
        """The request ``approval_id``, or None."""

    @abstractmethod
    def approval_for(self, workflow: str, call_key: str) -> Approval | None:
        """The newest request for the call ``call_key`` (identity, else signature) of ``workflow``, or None."""

    @abstractmethod
    def approvals(self, workflow: str | None = None) -> list[Approval]:
        """Every request (of ``workflow``, where given), newest first."""

    @abstractmethod
    def request_approval(
        self,
        workflow: str,
        tool: str,
        arguments: str,
        signature: str,
        identity: str | None,
        requested_by: Mapping[str, Any],
        expires_after: float,
    ) -> Approval:
        """The pending request for this call, made (and chained) if there is none yet: one per call, however often
        it is sent while it waits. ``expires_after``: how long a grant of it will stay usable, in seconds."""

    @abstractmethod
    def decide_approval(self, approval_id: int, grant: bool, by: str, reason: str | None = None) -> Approval:
        """A person's decision on the pending request ``approval_id``: granted (usable for its ``expires_after``
        from now) or denied.

        Raises:
            UsageError: no such request, or it is not pending (already decided, used or expired).
        """

    @abstractmethod
    def expire_approval(self, approval_id: int) -> bool:
        """Record that the grant ``approval_id`` passed its ``expires_at`` unused (False: it is not such a grant)."""


class Ownership(ABC):
    """A held claim on a workflow lineage; released by ``release`` or by the owner's death.

    A claim is *exclusive* (one live owner: the process numbers the workflow's calls itself, or an operator's
    command changes them) or *shared* (any number of processes at once, none of them exclusive: their calls are
    identified by content and take their sequences from the workflow's shared counter). See docs/sessions.md.
    """

    shared: bool = False
    """True while the claim is shared with other processes (``Journal.acquire(shared=True)``)."""

    @abstractmethod
    def release(self) -> None:
        """Give the workflow up (idempotent)."""

    def take_alone(self) -> bool:
        """Make a shared claim exclusive if no other live process shares the workflow now: True once this process
        owns it alone (from then on no other can share it), False while others do (the claim stays shared). An
        exclusive claim is already alone.

        Raises:
            JournalLost: the shared claim was lost on the way (an exclusive owner took the workflow in between).
        """
        return not self.shared


class Presence(Protocol):
    """This process as a live participant of the journal (``Journal.register_replica``): the calls it reserves
    carry ``replica_id``, and are in flight, not in doubt, for as long as it lives."""

    replica_id: str
    alive: bool
    """False while the liveness lock is lost (its connection is down and being made again)."""
    lost_reason: str | None
    """Why it was lost, while it is."""

    def close(self) -> None:
        """Stop being a participant (the calls it left PENDING are then in doubt)."""


class Journal(ABC):
    """A durable store of call records, shared by the proxy and the operator's commands.

    Every method may raise ``JournalUnavailable`` (the store cannot be read or written) or ``JournalCorrupt``.
    """

    location: str
    """Where the journal lives, safe to print (no credentials)."""

    audit_key: bytes | None = None
    """The operator's key (``--audit-key-env``): links this process adds to a hash chain are HMAC-SHA-256 under
    it, else plain SHA-256."""

    replica_id: str | None = None
    """The `checkpoint serve` replica this process is, once registered (PostgreSQL); its reservations carry it."""

    approvals: Approvals
    """The journal's approval requests."""

    def allocate_seq(self, workflow: str) -> int | None:
        """A sequence of ``workflow`` that no other process sharing it was given, for a call without an explicit
        one, once this process is a registered replica (``register_replica``); None otherwise (its own cursor
        decides: it owns the workflow alone)."""
        return None

    def ready_seq(self, workflow: str) -> None:
        """Have sequences of ``workflow``'s shared counter in hand before the first call needs one, where taking one
        could otherwise wait for another writer (``SqliteJournal``); by default nothing to do.

        Raises:
            JournalUnavailable: the counter could not be stepped.
        """
        return None

    def put_back(self, workflow: str, seq: int) -> None:
        """``seq`` of ``workflow``, which ``allocate_seq`` gave, went to no call (its reservation found a condition
        unmet): the next call takes it, where this process holds its sequences ahead; by default it stays unused."""
        return None

    def give_back(self) -> None:
        """Give back the sequences ``ready_seq`` took ahead, where no other process took a step since (this process
        no longer shares the workflow, or stops); by default nothing to do."""
        return None

    def replica_alive(self, replica_id: str) -> bool:
        """True while the replica ``replica_id`` is alive (holds its liveness lock); no replicas by default."""
        return False

    @abstractmethod
    def register_replica(self, on_commit: Callable[[], None] | None = None) -> Presence:
        """Become a live replica of the journal: a process that shares workflows with others (a `checkpoint serve`
        replica; a proxy whose calls are identified by content). Its reservations carry its id (``replica_id``),
        and another process tells its calls in flight from calls in doubt by its liveness lock. ``on_commit``,
        where the database can tell (PostgreSQL), is called from another thread when another replica commits.

        Raises:
            JournalUnavailable: the liveness lock cannot be taken.
        """

    @abstractmethod
    def reserve(self, lineage: Lineage, seq: int, call: NewCall, conditions: Sequence[Condition]) -> Reservation:
        """Reserve ``call`` PENDING at ``seq`` of the lineage's head, durably, if every condition holds: one
        transaction that tests the conditions in order against what is committed (taking turns with every other
        process on what each reads) and stops at the first that does not hold (``Unmet``: nothing written), else
        writes the row and what the conditions say (an approval used, the call counted, a confirmation linked).
        See ``conditions.py``.

        Raises:
            JournalError: the journal could not be read or written (nothing was reserved).
        """

    # ---- what a proxy needs ------------------------------------------------------------------------------

    @abstractmethod
    def acquire(self, root: str, command: str = "checkpoint", *, shared: bool = False) -> Ownership:
        """Become the one live owner of the lineage rooted at ``root``; ``shared``: one of any number of live
        processes that share it (none of which owns it alone).

        Raises:
            WorkflowOwned: another live process owns it alone, or (not ``shared``) others share it (the error names
                who: pid, host and since when).
        """

    @abstractmethod
    def lineage(self, workflow: str) -> Lineage:
        """The lineage a proxy started with ``--workflow-id workflow`` writes to: its newest branch.

        Registers ``workflow`` as a root if the journal has never seen it.
        """

    @abstractmethod
    def max_seq(self, lineage: Lineage, upto: int = MAX_SEQ) -> int:
        """The highest sequence up to ``upto`` that counts in ``lineage``, 0 if none."""

    @abstractmethod
    def unit(self) -> UnitOfWork:
        """An empty unit of work: the writes of several calls made durable by one commit (group commit)."""

    @abstractmethod
    def write_batches(self, batches: Sequence[Batch]) -> None:
        """Write the batches taken from units (here or in another process) in one transaction, durably unless
        every one is relaxed.

        Raises:
            JournalUnavailable: nothing was written (see ``UnitOfWork.commit``).
            JournalLost: the journal is gone for good.
        """

    def write_now(self, batches: Sequence[Batch]) -> bool:
        """``write_batches`` on the caller's thread if that is cheaper than handing them to a committer thread and
        cannot wait for another writer: True once written; False if nothing was written and a committer should
        (by default: always, for a journal across a network, whose every commit is a wait).

        Raises:
            JournalUnavailable: nothing was written, for another reason than a lock held elsewhere.
            JournalLost: the journal is gone for good.
        """
        return False

    @abstractmethod
    def session_starts(self, client: str | None) -> SessionStarts:
        """What the session starts recorded on this journal say to the proxy of the client session ``client`` (a
        ``pid:start``, ``client_process``; None: a session of no known client, such as a gateway's, which every
        start concerns and whose boundaries are taken as known): when the newest that concerns it was recorded (a
        new session, a resume, a clear, a compaction: a repeat of a call from before then is the resumed agent's),
        and whether its client records them at all (``session_starts.py``)."""

    @abstractmethod
    def reopening(self) -> tuple[str, bytes | None, str | None]:
        """What another process needs to open this journal as this one writes to it: the location (with its
        credentials: never put it in an argv or a log), the audit key and the replica identity."""

    @abstractmethod
    def record_event(self, workflow_id: str, kind: str, seq: int | None, detail: Mapping[str, Any]) -> None:
        """Append one event to ``workflow_id``'s hash chain, durably, in a transaction of its own.

        The journal records its own events (reserved, completed, failed, resolved, gc, forked) with the writes
        they describe; this is for other records of note, such as a tool policy's audit record. ``detail`` is a
        JSON object, stored as its canonical JSON (digests, ids and reasons; never arguments or results).

        Raises:
            ValueError: ``detail`` has no canonical JSON form.
        """

    @abstractmethod
    def claim_workflow(self, workflow: str, principal: str, requested: str, upstream: str | None = None) -> None:
        """Record ``workflow`` as ``principal``'s, unless it already is (see ``principals.PrincipalStore``).

        Raises:
            WorkflowOfAnother: it is another principal's, or was journaled without one.
        """

    # ---- what an operator needs ---------------------------------------------------------------------------

    @abstractmethod
    def principals(self) -> dict[str, str]:
        """Every workflow recorded as a principal's, and that principal."""

    @abstractmethod
    def owner(self, root: str) -> OwnerInfo | None:
        """The live owner of the lineage rooted at ``root``, or None."""

    @abstractmethod
    def sharers(self, root: str) -> list[OwnerInfo]:
        """The live processes that share the lineage rooted at ``root`` (``acquire(shared=True)``), as far as the
        database can name them."""

    @abstractmethod
    def root_of(self, workflow: str) -> str | None:
        """The root of the lineage ``workflow`` belongs to, or None if the journal has never seen it."""

    @abstractmethod
    def workflows(self) -> list[WorkflowSummary]:
        """Every workflow the journal knows, with its counts per state and its lineage."""

    @abstractmethod
    def calls(self, workflow: str) -> list[CallRecord]:
        """The rows written to ``workflow`` itself, in sequence order."""

    @abstractmethod
    def resolutions(self, workflow: str) -> list[Resolution]:
        """The audit trail of ``workflow``, oldest first."""

    @abstractmethod
    def resolve(
        self, workflow: str, seq: int, action: ResolveAction, outcome: str | None, user: str, host: str
    ) -> Resolution:
        """Record an operator's decision about the PENDING or FAILED call at ``seq`` (audited).

        The caller must own the workflow's lineage (see ``acquire``).

        Raises:
            UsageError: there is no such call, or its state cannot be resolved that way.
        """

    @abstractmethod
    def take_in_doubt(self, workflow: str, seq: int) -> CallRecord | None:
        """Make the in-doubt call at ``seq`` this process's to settle (a tool policy's probe or idempotency key).

        Where replicas share the journal the row is marked as this replica's, atomically: of two replicas that
        try at once, one gets it; the other then sees it in flight. Elsewhere the owner's lock already makes it
        ours. The caller must own the workflow's lineage (or be a replica).

        Returns the row, or None when it is no longer PENDING, or is in flight on a live replica.
        """

    @abstractmethod
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
        """Record, durably and audited, what a tool policy proved about the in-doubt call at ``seq``.

        ``COMPLETED``: the row becomes COMPLETED with ``outcome``. ``RELEASED``: the row is deleted (the next call
        there runs), or, with ``keep_row``, stays PENDING because the call is being sent again right now (its
        answer completes the row). ``by`` names the policy's means (``probe list_outbox``, ``idempotency key``);
        ``evidence`` is the JSON audit detail. Applies only to a PENDING row this process took
        (``take_in_doubt``); returns False (and writes nothing) otherwise.
        """

    @abstractmethod
    def collect(self, before: str, skip_roots: Sequence[str] = ()) -> dict[str, list[int]]:
        """Delete COMPLETED and FAILED rows finished before ``before`` (never PENDING); what was removed.

        Lineages rooted in ``skip_roots`` are left alone. A collected sequence is remembered: a later call
        there is refused, never re-run.
        """

    @abstractmethod
    def links(self, workflow: str) -> list[Link]:
        """``workflow``'s hash chain (its events), in stored order."""

    @abstractmethod
    def chained_workflows(self) -> list[str]:
        """Every workflow the journal has a chain, a branch row or a call for, sorted."""

    @abstractmethod
    def version(self) -> str:
        """A token that changes whenever what the operator's views show may have changed: calls, resolutions,
        workflows or live owners. Equal tokens mean nothing changed. Cheap enough to poll every second (the
        operator's web pages do, to refresh themselves)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store."""
