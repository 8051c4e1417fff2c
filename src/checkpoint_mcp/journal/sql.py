"""The journal in portable SQL: every statement the proxy and the operator commands run, written once.

Subclasses (``sqlite.py``, ``postgres.py``) provide the connection, transactions, schema migrations, ownership
locks and the translation of their driver's exceptions; statements here use ``?`` placeholders, which a
subclass rewrites if its driver wants another style. Timestamps are ISO 8601 UTC text in both databases, so
they compare as strings and read the same everywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import JournalError, JournalUnavailable, UsageError
from checkpoint_mcp.journal import audit, chain, session_starts
from checkpoint_mcp.journal.approval_store import SqlApprovals
from checkpoint_mcp.journal.base import (
    MAX_CLIENT_SEQ,
    MAX_SEQ,
    Batch,
    Branch,
    Lineage,
    Resolution,
    ResolveAction,
    UnitOfWork,
    WorkflowSummary,
    lineage_from_rows,
)
from checkpoint_mcp.journal.chain import Event
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.principals import Principals
from checkpoint_mcp.journal.records import CallRecord, CallState
from checkpoint_mcp.journal.repeat_rows import find_repeat, newest_repeat
from checkpoint_mcp.journal.reserving import METERED_OF_CALL, Reserving
from checkpoint_mcp.journal.rows import COLUMNS, FINISH_CALL, INSERT_CALL, insert_params
from checkpoint_mcp.journal.rows import record as _record
from checkpoint_mcp.journal.sequences import BLOCK_SECONDS, SequenceBlocks
from checkpoint_mcp.journal.settlements import Settlements

_INSERT_CALL = INSERT_CALL
_DISOWN_CALL = "UPDATE calls SET replica_id = NULL WHERE workflow_id = ? AND seq = ? AND state = 'PENDING'"
AHEAD_MAX = 64
"""The most sequences a proxy of one client session holds ahead (``SqlJournal.allocate_seq``): what a crash of it
leaves unused, at most."""
TAKE_BLOCK = (
    "UPDATE workflows SET next_seq = max(next_seq, coalesce(fork_seq, 0),"
    f" (SELECT coalesce(max(seq), 0) FROM calls WHERE workflow_id = ? AND seq <= {MAX_CLIENT_SEQ})) + ?"
    " WHERE workflow_id = ? RETURNING next_seq"
)
"""One step of a workflow's shared counter by a block's size, past every sequence it holds (in the clients' range:
rows an older Checkpoint wrote above it do not move it, as they do not move the cursor) and past where its branch
starts: the block's last sequence (``sequences``). SQLite's ``max`` of several values; PostgreSQL says
``greatest``."""
_INSERT_BRANCH = "INSERT INTO workflows (workflow_id, root_id, parent_id, fork_seq, created_at) VALUES (?, ?, ?, ?, ?)"


EVENT = "-- event"
"""Not a statement: marks an event queued in a unit of work, linked onto its chain at commit."""

Op = tuple[str, tuple[Any, ...], Event | None]
Group = tuple[str, list[tuple[Any, ...]], list[Event | None]]


class _SqlUnit(UnitOfWork):
    """Pending writes in order, plus an overlay of the rows they create, so reads see them before commit.

    Each write may carry the event that records it; the events are linked onto their chains when the unit
    commits, in the same transaction.
    """

    def __init__(self, journal: SqlJournal) -> None:
        self._j = journal
        self._ops: list[Op] = []
        self._rows: dict[tuple[str, int], CallRecord] = {}
        self._keys: dict[tuple[str, str], CallRecord] = {}
        self._branches: dict[str, int] = {}
        # The overlays of batches taken but not yet settled (their commit may be running on another thread).
        self._taken: list[_Overlay] = []

    @property
    def empty(self) -> bool:
        return not self._ops

    def mark(self) -> int:
        return len(self._ops)

    def rollback_to(self, mark: int) -> None:
        if mark >= len(self._ops):
            return
        del self._ops[mark:]
        # Rare (a failure while routing one line): rebuild the overlay from the writes that remain.
        self._rows.clear()
        self._keys.clear()
        self._branches.clear()
        for sql, params, _ in self._ops:
            if sql is _INSERT_CALL:
                self._remember(_pending_record(params))
            elif sql is _INSERT_BRANCH:
                root = params[1]
                self._branches[root] = self._branches.get(root, 0) + 1

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        with self._j.reading():
            return self._j.execute(sql, params).fetchone()

    def _pending_row(self, key: tuple[str, int]) -> CallRecord | None:
        return _newest(key, [self._rows, *(overlay.rows for overlay in reversed(self._taken))])

    def _pending_key(self, key: tuple[str, str]) -> CallRecord | None:
        return _newest(key, [self._keys, *(overlay.keys for overlay in reversed(self._taken))])

    def _branch_count(self, root: str) -> int:
        return self._branches.get(root, 0) + sum(overlay.branches.get(root, 0) for overlay in self._taken)

    def read(self, lineage: Lineage, seq: int) -> CallRecord | None:
        branch = lineage.branch_at(seq)
        pending = self._pending_row((branch.workflow, seq))
        if pending is not None:
            return pending
        row = self._one(f"SELECT {COLUMNS} FROM calls WHERE workflow_id = ? AND seq = ?", (branch.workflow, seq))
        return _record(row) if row else None

    def read_key(self, lineage: Lineage, key: str) -> CallRecord | None:
        for branch, start, limit in lineage.ranges():
            pending = self._pending_key((branch.workflow, key))
            if pending is not None and pending.seq >= start and (limit is None or pending.seq < limit):
                return pending
            sql = f"SELECT {COLUMNS} FROM calls WHERE workflow_id = ? AND idempotency_key = ? AND seq >= ?"
            params: tuple[Any, ...] = (branch.workflow, key, start)
            if limit is not None:
                sql += " AND seq < ?"
                params += (limit,)
            row = self._one(sql, params)
            if row:
                return _record(row)
        return None

    def read_signature(
        self, lineage: Lineage, signature: str, since: str, identity: str | None = None
    ) -> CallRecord | None:
        rows = [*self._rows.values(), *(row for overlay in self._taken for row in overlay.rows.values())]
        return find_repeat(self._one, COLUMNS, _record, rows, lineage, signature, since, identity)

    def newest_repeat(self, workflow: str, seq: int) -> tuple[dict[str, Any], str] | None:
        for _, _, event in reversed(self._ops):
            if event is not None and event.kind == "repeat" and (event.workflow, event.seq) == (workflow, seq):
                detail = event.detail
                return (json.loads(detail) if isinstance(detail, str) else dict(detail)), event.at
        return newest_repeat(self._one, workflow, seq)

    def reserve(self, workflow: str, seq: int, call: NewCall) -> None:
        now = utc_now()
        detail = chain.reserved_detail(call.tool, call.arguments, call.signature, call.key, call.identity)
        event = Event(workflow, "reserved", seq, detail, now)
        params = insert_params(workflow, seq, call, now, self._j.replica_id)
        self._ops.append((_INSERT_CALL, params, event))
        self._remember(_pending_record(params))

    def _remember(self, record: CallRecord) -> None:
        self._rows[(record.workflow, record.seq)] = record
        if record.key is not None:
            self._keys[(record.workflow, record.key)] = record

    def finish(self, workflow: str, seq: int, state: CallState, outcome: str, tool_error: bool = False) -> None:
        now = utc_now()
        event = Event(workflow, state.value.lower(), seq, chain.finished_detail(outcome), now)
        self._ops.append((FINISH_CALL, (state.value, outcome, now, int(tool_error), workflow, seq), event))

    def disown(self, workflow: str, seq: int) -> None:
        self._ops.append((_DISOWN_CALL, (workflow, seq), None))

    def withdraw(self, workflow: str, seq: int, outcome: str) -> None:
        self.finish(workflow, seq, CallState.FAILED, outcome)
        self._ops.append((METERED_OF_CALL, (workflow, seq), None))

    def branch(self, lineage: Lineage, seq: int) -> Lineage:
        root = lineage.root
        count = self._one("SELECT count(*) FROM workflows WHERE root_id = ? AND parent_id IS NOT NULL", (root,))[0]
        count = int(count) + self._branch_count(root)
        return Lineage((Branch(f"{root}~{count + 1}", seq), *lineage.branches))

    def fork(self, branched: Lineage) -> None:
        root, (head, parent) = branched.root, branched.branches[:2]
        self._branches[root] = self._branches.get(root, 0) + 1
        now = utc_now()
        event = Event(head.workflow, "forked", head.start, {"parent": parent.workflow, "root": root}, now)
        self._ops.append((_INSERT_BRANCH, (head.workflow, root, parent.workflow, head.start, now), event))

    def record_event(self, workflow: str, kind: str, seq: int | None, detail: Mapping[str, Any]) -> None:
        text = chain.canonical_text(detail)  # refuse what has no canonical form now, not at commit
        self._ops.append((EVENT, (), Event(workflow, kind, seq, text, utc_now())))

    def take(self, relaxed: bool = False) -> Batch | None:
        ops, self._ops = self._ops, []
        if not ops:
            return None
        overlay = _Overlay(self._rows, self._keys, self._branches)
        self._rows, self._keys, self._branches = {}, {}, {}
        self._taken.append(overlay)
        groups = grouped(ops)
        return Batch(groups, not relaxed or any(group[0] is not FINISH_CALL for group in groups), overlay)

    def settled(self, batch: Batch) -> None:
        self._taken = [overlay for overlay in self._taken if overlay is not batch.overlay]

    def commit(self, relaxed: bool = False) -> None:
        batch = self.take(relaxed)
        if batch is None:
            return
        try:
            self._j.write(batch.groups, durable=batch.durable)
        finally:
            self.settled(batch)


def _pending_record(params: tuple[Any, ...]) -> CallRecord:
    """The PENDING row an ``INSERT_CALL`` with ``params`` writes, as reads of the unit see it before the commit."""
    workflow, seq, tool, arguments, signature, now, key, replica, identity, repeat_rule, rule = params
    return CallRecord(
        workflow,
        seq,
        tool,
        arguments,
        signature,
        CallState.PENDING,
        None,
        now,
        None,
        key,
        replica,
        identity,
        repeat_rule=repeat_rule,
        rule=rule,
    )


def _newest(key: Any, layers: Sequence[Mapping[Any, CallRecord]]) -> CallRecord | None:
    """The row at ``key`` in the first layer that has one (the unit's own writes first, then its taken batches,
    newest first)."""
    for layer in layers:
        found = layer.get(key)
        if found is not None:
            return found
    return None


class _Overlay(NamedTuple):
    """The rows a taken batch creates, shown to reads until it is settled."""

    rows: dict[tuple[str, int], CallRecord]
    keys: dict[tuple[str, str], CallRecord]
    branches: dict[str, int]


def merged(batches: Sequence[Batch]) -> tuple[list[Group], bool]:
    """The groups of ``batches`` in order, for one transaction, and whether it must be durable (unless every
    batch is relaxed)."""
    return [group for batch in batches for group in batch.groups], any(batch.durable for batch in batches)


def grouped(ops: Sequence[Op]) -> list[Group]:
    """Consecutive statements of one kind in one group (one executemany); the order of kinds is kept (a branch
    row before the calls reserved on it)."""
    groups: list[Group] = []
    for sql, params, event in ops:
        if groups and groups[-1][0] is sql:
            groups[-1][1].append(params)
            groups[-1][2].append(event)
        else:
            groups.append((sql, [params], [event]))
    return groups


class SqlJournal(Reserving, Settlements, Principals):
    """Everything a journal does, in SQL both SQLite and PostgreSQL accept.

    Its parts, each written over the journal's own connection (``statements.Statements``): the conditional
    reservation (``Reserving``), the settlements of in-doubt calls (``Settlements``) and whose each workflow is
    (``Principals``), which it is; and ``approvals`` (``SqlApprovals``), which it holds.
    """

    def __init__(self) -> None:
        self.approvals = SqlApprovals(self)
        self._sequences = SequenceBlocks(lambda workflow, size: self._take_block(workflow, size, wait=True))
        self._ahead: dict[str, list[int]] = {}  # workflow -> sequences of its counter in hand (``ready_seq``)
        self._stepped: dict[str, tuple[float, int]] = {}  # workflow -> when its counter was last stepped, and how far

    def allocate_seq(self, workflow: str) -> int | None:
        """For a replica: a sequence of the workflow's shared counter. A workflow ``ready_seq`` readied (a proxy of
        one client session) takes them ahead, a few at a time (``_top_up``): its calls take consecutive sequences,
        and where taking more would wait for another writer (SQLite's write lock, held by another session's
        commit), one in hand is used and the step waits for the next call, so the proxy's event loop goes on. Any
        other (a gateway replica) takes them from blocks (``sequences``: 1 to ``BLOCK_MAX`` by the pace of its
        calls).

        Raises:
            JournalUnavailable: the counter could not be stepped (nothing was handed out).
            JournalLost: the journal is gone for good.
        """
        if self.replica_id is None:
            return None
        held = self._ahead.get(workflow)
        if held is None:
            return self._sequences.next(workflow)
        if len(held) < 2:
            self._top_up(workflow, held, wait=not held)
        return held.pop(0)

    def ready_seq(self, workflow: str) -> None:
        """See ``Journal.ready_seq``: this process takes ``workflow``'s sequences ahead (``allocate_seq``); the
        first are taken now, waiting for the lock if they must.

        Raises:
            JournalUnavailable: the counter could not be stepped.
        """
        if self.replica_id is None:
            return
        held = self._ahead.setdefault(workflow, [])
        if len(held) < 2:
            self._top_up(workflow, held, wait=True)

    def _top_up(self, workflow: str, held: list[int], *, wait: bool) -> None:
        """Take sequences of ``workflow``'s counter until enough are in hand: the call's and the next, or, while the
        calls come faster than ``BLOCK_SECONDS`` a step, twice as many as the step before (up to ``AHEAD_MAX``:
        one step a call cost a write transaction each); ``wait``: for another writer's lock, else (one is in hand) a
        step that meets it is left for the next call.

        Raises:
            JournalUnavailable: the step failed (nothing was taken), and no sequence is in hand.
        """
        now = time.monotonic()
        stepped, target = self._stepped.get(workflow, (0.0, 2))
        if now - stepped < BLOCK_SECONDS:
            target = min(target * 2, AHEAD_MAX)
        elif now - stepped > 4 * BLOCK_SECONDS:
            target = 2
        size = max(target - len(held), 1)
        try:
            last = self._take_block(workflow, size, wait=wait)
        except JournalUnavailable as exc:
            if wait or not held or not self._met_a_lock(exc):
                raise
            return
        if last is None:
            raise JournalUnavailable(f"journal {self.location} has no workflow {workflow!r} to take a sequence of")
        held.extend(range(last - size + 1, last + 1))
        self._stepped[workflow] = (now, target)

    def put_back(self, workflow: str, seq: int) -> None:
        """See ``Journal.put_back``: the next call of this process takes ``seq`` first."""
        held = self._ahead.get(workflow)
        if held is not None and seq not in held:
            held.insert(0, seq)

    def give_back(self) -> None:
        """See ``Journal.give_back``: each workflow's counter goes back to before the sequences in hand, where no
        other process took a step since (a compare-and-set); else they stay unused. Best effort."""
        ahead, self._ahead = self._ahead, {}
        for workflow, held in ahead.items():
            if held:
                with contextlib.suppress(JournalError), self.transaction():
                    self.execute(
                        "UPDATE workflows SET next_seq = ? WHERE workflow_id = ? AND next_seq = ?",
                        (held[0] - 1, workflow, held[-1]),
                    )

    def _met_a_lock(self, exc: JournalUnavailable) -> bool:
        """Whether ``exc`` says a statement met another writer's lock (and changed nothing): by default never."""
        return False

    @abstractmethod
    def _take_block(self, workflow: str, size: int, *, wait: bool) -> int | None:
        """One atomic step of ``workflow``'s counter by ``size`` (``TAKE_BLOCK``): the block's last sequence, or
        None when the journal has no such workflow; ``wait``: for another writer's lock, where the database has
        one to wait for."""

    def session_starts(self, client: str | None) -> session_starts.SessionStarts:
        """See ``Journal.session_starts``."""
        with self.reading():
            if client is None:
                row = self.execute(session_starts.NEWEST).fetchone()
                return session_starts.SessionStarts(str(row[0]) if row else None, True)
            like = session_starts.pattern(client)
            row = self.execute(session_starts.NEWEST_FOR, (like,)).fetchone()
            own = self.execute(session_starts.OWN, (like,)).fetchone()
        return session_starts.SessionStarts(str(row[0]) if row else None, own is not None)

    @abstractmethod
    def write(self, groups: list[Group], durable: bool = True) -> None:
        """Run the statements (each with its parameter tuples and their events) as one transaction, by
        ``write_txn``: durable, or with ``durable=False`` (outcomes only, ``UnitOfWork.commit(relaxed=True)``)
        safe from a crash of this process but not from a power loss, where the backend offers that.

        Raises:
            JournalUnavailable: nothing was written (see ``UnitOfWork.commit``).
        """

    def write_txn(self, groups: list[Group]) -> None:
        """The statements of ``groups`` and the links of their events, inside the caller's transaction.

        A finish that found its call no longer PENDING (an operator resolved it meanwhile) changed nothing, and
        leaves no event.
        """
        events: list[Event] = []
        for sql, rows, queued in groups:
            if sql is EVENT:
                events.extend(event for event in queued if event is not None)
            elif sql is FINISH_CALL:
                changed = self.finish_calls(rows)
                events.extend(event for event, done in zip(queued, changed, strict=True) if done and event is not None)
            else:
                self.execute_many(sql, rows)
                events.extend(event for event in queued if event is not None)
        self.link_txn(events)

    def finish_calls(self, rows: Sequence[Sequence[Any]]) -> list[bool]:
        """Run ``FINISH_CALL`` for each parameter tuple (inside the open transaction); for each, whether it changed
        its row (False: the call was no longer PENDING)."""
        return [self.execute(FINISH_CALL, params).rowcount > 0 for params in rows]

    def record_event(self, workflow_id: str, kind: str, seq: int | None, detail: Mapping[str, Any]) -> None:
        """Append one event to ``workflow_id``'s chain, durably, in a transaction of its own.

        Raises:
            ValueError: ``detail`` has no canonical JSON form.
        """
        text = chain.canonical_text(detail)
        with self.transaction():
            self.link_txn([Event(workflow_id, kind, seq, text, utc_now())])

    @abstractmethod
    def errors(self, action: str) -> AbstractContextManager[None]:
        """The driver's exceptions become ``JournalError`` (nothing else: no reconnection, no transaction)."""

    def unit(self) -> UnitOfWork:
        """An empty unit of work on this journal."""
        return _SqlUnit(self)

    def write_batches(self, batches: Sequence[Batch]) -> None:
        """One transaction for every batch's statements, in order (group commit across units)."""
        groups, durable = merged(batches)
        if groups:
            self.write(groups, durable=durable)

    # ---- lineage ------------------------------------------------------------------------------------------

    def lineage(self, workflow: str) -> Lineage:
        """The newest branch of ``workflow`` and the chain it inherits from."""
        with self.transaction():
            self.execute(
                "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (workflow_id) DO NOTHING",
                (workflow, workflow, utc_now()),
            )
            root = self.execute("SELECT root_id FROM workflows WHERE workflow_id = ?", (workflow,)).fetchone()[0]
            rows = self.execute(
                "SELECT workflow_id, parent_id, fork_seq, created_at, collected_through FROM workflows"
                " WHERE root_id = ?",
                (root,),
            ).fetchall()
        return lineage_from_rows(workflow, rows)

    def max_seq(self, lineage: Lineage, upto: int = MAX_SEQ) -> int:
        """The highest sequence up to ``upto`` that counts in ``lineage`` (collected ones included), 0 if none."""
        highest = 0
        with self.reading():
            for branch, start, limit in lineage.ranges():
                sql = "SELECT max(seq) FROM calls WHERE workflow_id = ? AND seq >= ? AND seq <= ?"
                params: tuple[Any, ...] = (branch.workflow, start, upto)
                if limit is not None:
                    sql += " AND seq < ?"
                    params += (limit,)
                found = self.execute(sql, params).fetchone()[0]
                collected = branch.collected_through if limit is None else min(branch.collected_through, limit - 1)
                highest = max(highest, int(found or 0), min(collected, upto))
        return highest

    # ---- operator -----------------------------------------------------------------------------------------

    def root_of(self, workflow: str) -> str | None:
        """The root of ``workflow``'s lineage, or None if unknown."""
        with self.reading():
            row = self.execute("SELECT root_id FROM workflows WHERE workflow_id = ?", (workflow,)).fetchone()
        return str(row[0]) if row else None

    def workflows(self) -> list[WorkflowSummary]:
        """Every workflow with its counts per state, last activity and live owner (or the live proxies sharing
        it)."""
        with self.reading():
            rows = self.execute(
                "SELECT workflow_id, root_id, parent_id, fork_seq, created_at FROM workflows ORDER BY created_at"
            ).fetchall()
            counts = self.execute(
                "SELECT workflow_id, state, count(*), max(coalesce(finished_at, started_at)) FROM calls"
                " GROUP BY workflow_id, state"
            ).fetchall()
        per: dict[str, dict[CallState, int]] = {}
        last: dict[str, str] = {}
        for workflow, state, count, latest in counts:
            per.setdefault(workflow, {})[CallState(state)] = int(count)
            if latest and latest > last.get(workflow, ""):
                last[workflow] = latest
        roots = {row[1] for row in rows}
        owners = {root: self.owner(root) for root in roots}
        sharers = {root: tuple(self.sharers(root)) if owners[root] is None else () for root in roots}
        principals = self.principals()
        return [
            WorkflowSummary(
                workflow=row[0],
                root=row[1],
                parent=row[2],
                fork_seq=int(row[3]) if row[3] is not None else None,
                created_at=row[4],
                counts=per.get(row[0], {}),
                last_activity=last.get(row[0]),
                owner=owners[row[1]],
                principal=principals.get(row[0], principals.get(row[1])),  # a branch is its root's principal's
                sharers=sharers[row[1]],
            )
            for row in rows
        ]

    def calls(self, workflow: str) -> list[CallRecord]:
        """The rows written to ``workflow`` itself, in sequence order."""
        with self.reading():
            rows = self.execute(
                f"SELECT {COLUMNS} FROM calls WHERE workflow_id = ? ORDER BY seq", (workflow,)
            ).fetchall()
        return [_record(row) for row in rows]

    def resolutions(self, workflow: str) -> list[Resolution]:
        """The audit trail of ``workflow``, oldest first."""
        with self.reading():
            rows = self.execute(
                "SELECT workflow_id, seq, action, previous_state, previous_outcome, outcome, resolved_by, host, at"
                " FROM resolutions WHERE workflow_id = ? ORDER BY id",
                (workflow,),
            ).fetchall()
        return [
            Resolution(r[0], int(r[1]), ResolveAction(r[2]), CallState(r[3]), r[4], r[5], r[6], r[7], r[8])
            for r in rows
        ]

    def resolve(
        self, workflow: str, seq: int, action: ResolveAction, outcome: str | None, user: str, host: str
    ) -> Resolution:
        """Apply and audit an operator's decision about one call.

        Raises:
            UsageError: no such call, or a COMPLETED call asked to become something else than released.
        """
        with self.transaction():
            row = self.execute(
                f"SELECT {COLUMNS} FROM calls WHERE workflow_id = ? AND seq = ?", (workflow, seq)
            ).fetchone()
            if row is None:
                raise UsageError(f"workflow {workflow!r} has no call #{seq} to resolve")
            record = _record(row)
            if record.state is CallState.PENDING and record.replica is not None and self.replica_alive(record.replica):
                raise UsageError(
                    f"call #{seq} of {workflow!r} is in flight on the live replica {record.replica} (a proxy of "
                    "another session, or a gateway replica); wait for its outcome (or stop that process) before "
                    "resolving it"
                )
            if record.state is CallState.COMPLETED and action is not ResolveAction.RELEASED:
                raise UsageError(
                    f"call #{seq} of {workflow!r} is COMPLETED; only --release applies to it (to let another call "
                    "take its sequence)"
                )
            now = utc_now()
            if action is ResolveAction.RELEASED:
                self.execute("DELETE FROM calls WHERE workflow_id = ? AND seq = ?", (workflow, seq))
                if record.state is not CallState.COMPLETED:  # it runs again, and counts then: not twice
                    self.execute(METERED_OF_CALL, (workflow, seq))
            else:
                state = CallState.COMPLETED if action is ResolveAction.COMPLETED else CallState.FAILED
                self.execute(
                    "UPDATE calls SET state = ?, outcome = ?, finished_at = ? WHERE workflow_id = ? AND seq = ?",
                    (state.value, outcome, now, workflow, seq),
                )
            self.execute(
                "INSERT INTO resolutions (workflow_id, seq, action, previous_state, previous_outcome, outcome,"
                " resolved_by, host, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (workflow, seq, action.value, record.state.value, record.outcome, outcome, user, host, now),
            )
            detail = {
                "action": action.value,
                "previous_state": record.state.value,
                "previous_outcome": chain.text_digest(record.outcome),
                "outcome": chain.text_digest(outcome),
                "by": user,
                "host": host,
            }
            self.link_txn([Event(workflow, "resolved", seq, detail, now)])
        return Resolution(workflow, seq, action, record.state, record.outcome, outcome, user, host, now)

    def version(self) -> str:
        """What the rows look like (``content_marker``) and who owns each lineage, as one short digest."""
        with self.reading():
            content = self.content_marker()
            roots = sorted(row[0] for row in self.execute("SELECT DISTINCT root_id FROM workflows").fetchall())
        owners = [self.owner(root) for root in roots]
        return hashlib.sha256(repr((content, roots, owners)).encode()).hexdigest()[:16]

    def content_marker(self) -> tuple[Any, ...]:
        """Values that change whenever a call, resolution or workflow row is written or deleted.

        Portable, and a scan of the tables: a database with a cheaper change counter overrides it.
        """
        row = self.execute(
            "SELECT (SELECT count(*) FROM calls), (SELECT count(finished_at) FROM calls),"
            " (SELECT max(started_at) FROM calls), (SELECT max(finished_at) FROM calls),"
            " (SELECT count(*) FROM resolutions), (SELECT max(at) FROM resolutions), (SELECT count(*) FROM workflows),"
            " (SELECT count(*) FROM approvals), (SELECT count(decided_at) FROM approvals),"
            " (SELECT count(used_at) FROM approvals), (SELECT count(*) FROM approvals WHERE state = 'expired')"
        ).fetchone()
        return tuple(row)

    def collect(self, before: str, skip_roots: Sequence[str] = ()) -> dict[str, list[int]]:
        """Delete finished rows older than ``before`` outside ``skip_roots``; remember how far each went."""
        removed: dict[str, list[int]] = {}
        with self.transaction():
            rows = self.execute(
                "SELECT c.workflow_id, c.seq FROM calls c JOIN workflows w ON w.workflow_id = c.workflow_id"
                " WHERE c.state IN ('COMPLETED', 'FAILED') AND c.finished_at < ? ORDER BY c.workflow_id, c.seq",
                (before,),
            ).fetchall()
            roots = dict(self.execute("SELECT workflow_id, root_id FROM workflows").fetchall())
            for workflow, seq in rows:
                if roots.get(workflow) not in skip_roots:
                    removed.setdefault(workflow, []).append(int(seq))
            for workflow, seqs in removed.items():
                for seq in seqs:
                    self.execute("DELETE FROM calls WHERE workflow_id = ? AND seq = ?", (workflow, seq))
                self.execute(
                    "UPDATE workflows SET collected_through = ? WHERE workflow_id = ? AND collected_through < ?",
                    (max(seqs), workflow, max(seqs)),
                )
            for workflow, seqs in removed.items():
                self.lock_workflow(workflow)
                detail, cut = audit.gc_anchor(self.links(workflow), seqs, before, self.audit_key)
                self.link_txn([Event(workflow, chain.GC, None, detail, utc_now())])
                if cut is not None:  # the anchor now vouches for the links up to the cut
                    self.execute("DELETE FROM events WHERE workflow_id = ? AND id <= ?", (workflow, cut))
        return removed

    def links(self, workflow: str) -> list[chain.Link]:
        """``workflow``'s hash chain, in stored order."""
        with self.reading():
            rows = self.execute(
                "SELECT id, workflow_id, seq, kind, detail, at, prev_hash, hash FROM events WHERE workflow_id = ?"
                " ORDER BY id",
                (workflow,),
            ).fetchall()
        return [chain.Link(int(r[0]), r[1], None if r[2] is None else int(r[2]), *r[3:]) for r in rows]

    def chained_workflows(self) -> list[str]:
        """Every workflow with a chain, a row or a call, sorted."""
        with self.reading():
            rows = self.execute(
                "SELECT workflow_id FROM workflows UNION SELECT workflow_id FROM events"
                " UNION SELECT workflow_id FROM calls"
            ).fetchall()
        return sorted(row[0] for row in rows)
