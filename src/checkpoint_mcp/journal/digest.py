"""Read-only digests of a journal for the resume brief: where a workflow stood, what is in doubt, what was done.

The session server reads the project's journals here (``read_only.open_reader`` opens one), as they
are, never created, migrated or locked: SQLite through a read-only URI (``immutable=1`` without a write-ahead log,
so not even ``-wal``/``-shm`` files appear; ``mode=ro`` beside a live proxy's log), PostgreSQL on a read-only session
that runs no DDL. Ownership is read without the owner's lock: a shared probe of the lock file, ``pg_locks``.

Two reads, both index-backed in the usual case (primary key ``(workflow_id, seq)``, no new index):

* ``mark`` at a save: the lineage head, the last sequence and its time, the calls per state, the sequences in flight.
  This one scans the workflow's rows once; a save can afford it, a SessionStart hook could not.
* ``digest`` at a load: given the mark, only the rows after the saved sequence and the few saved in-flight ones are
  read. With no mark (an older checkpoint, a journal configured since) or a journal changed under it (a fork, a
  released call, a row inserted below the mark, a different file), it falls back to the journal's clock: rows
  finished after the save's time, and every PENDING row, by a scan.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from checkpoint_mcp.journal.base import Lineage, lineage_from_rows
from checkpoint_mcp.journal.records import REDACTED_ARGUMENTS, CallState

DONE_FETCH: Final = 200
"""At most this many of the newest calls done since the save are read in full; the rest are only counted."""
PENDING_MARK_MAX: Final = 100
"""A mark lists at most this many in-flight sequences; a workflow with more gets no mark (the load scans)."""
SHORT_ARGUMENTS: Final = 80
OLDEST_SCHEMA: Final = 2  # the oldest schema the digest reads (a proxy migrates older ones)
_REPLICAS_SCHEMA: Final = 3  # the first schema whose calls name the replica that reserved them
_EVENTS_SCHEMA: Final = 4  # the first schema with the events table (tool policies' audit records)
REPEATS_FETCH: Final = 100
"""At most this many caught repeats are read per branch for the brief."""
_COLUMNS: Final = "workflow_id, seq, tool, arguments, state, started_at, finished_at"
_POLICY_SCHEMA: Final = 7  # the first schema that marks tool errors and keeps each call's repeat rule
_COLUMNS_7: Final = f"{_COLUMNS}, tool_error, repeat_rule"
_RULE_SCHEMA: Final = 8  # the first schema that keeps the policy rule that decided each call (issue 43)
_COLUMNS_8: Final = f"{_COLUMNS_7}, rule"
_RAN: Final = "coalesce(repeat_rule, '') = 'allow' AND state = 'COMPLETED' AND tool_error = 0"
"""A call that did its work and whose repeats its tool policy lets run (clicks, checkouts): counted, not listed."""


@dataclass(frozen=True)
class Mark:
    """Where a workflow stood in its journal at a save."""

    head: str
    """The branch calls went to (the workflow itself unless it was forked)."""
    last_seq: int
    last_at: str | None
    """When the call at ``last_seq`` started (the journal's clock); None for an empty workflow."""
    calls: int
    completed: int
    failed: int
    pending: tuple[int, ...]
    resolutions: int
    """The newest ``resolutions`` id then, so a later ``resolve --release`` is noticed."""


@dataclass(frozen=True)
class Call:
    """One journaled call as the brief shows it."""

    workflow: str
    seq: int
    tool: str
    arguments: str | None
    """Compact JSON, cut to ``SHORT_ARGUMENTS``; None when the proxy ran with ``--redact-args-in-journal``."""
    state: CallState
    started_at: str
    finished_at: str | None
    tool_error: bool = False
    """COMPLETED with a result that is a tool error: the upstream said it did not do its work."""
    repeat_rule: str | None = None
    """The call's tool's repeat rule when it ran (``refuse``, ``replay``, ``confirm``, ``allow``); None without a
    policy, or in a journal older than schema 7."""
    rule: str | None = None
    """The policy rule that decided it (``tools.start_process.when.push``); None without a policy, or in a journal
    older than schema 8."""

    @property
    def failed(self) -> bool:
        """True when the upstream said the call did not do its work: FAILED, or a tool error."""
        return self.state is CallState.FAILED or self.tool_error


@dataclass(frozen=True)
class Ran:
    """Calls of one tool done since the save whose repeats their tool policy lets run: counted, not listed."""

    workflow: str
    tool: str
    count: int
    first: int
    last: int


@dataclass(frozen=True)
class Refused:
    """A call a tool policy's limit or budget refused (an event of kind ``limit``), not run."""

    workflow: str
    tool: str
    reason: str
    """``limit``, ``budget`` or ``budget_amount``."""
    at: str
    runs_again_after: str | None


@dataclass(frozen=True)
class Settled:
    """An in-doubt call a tool policy settled by itself (a probe, or the upstream's idempotency key)."""

    workflow: str
    seq: int
    tool: str | None
    """None when the row is gone (released by a probe and not called again yet)."""
    action: str
    """``completed`` (it had run), or ``released`` (it had not, or it was sent again under its key)."""
    by: str
    """The means, as the audit record names it: ``probe list_outbox``, ``idempotency key``."""
    at: str


SETTLED_BY = "checkpoint (%"
"""How the audit records of a tool policy's settlements begin (``resolved_by``); an operator's never do."""


@dataclass(frozen=True)
class Digest:
    """What a resumed agent must know about one workflow's side effects."""

    head: str
    in_doubt: tuple[Call, ...] = ()
    """PENDING calls no live proxy is waiting for: they may or may not have happened."""
    in_flight: tuple[Call, ...] = ()
    """PENDING calls a live proxy sent and still waits for."""
    done: tuple[Call, ...] = ()
    """The newest calls done (COMPLETED or FAILED) since the save, at most ``DONE_FETCH``, newest last."""
    done_total: int = 0
    done_by_tool: dict[str, int] = field(default_factory=dict)
    before: dict[str, int] = field(default_factory=dict)
    """Calls per state (``completed``, ``failed``) done before the save."""
    exact: bool = True
    """True when "since" was told by sequence from the save's mark; False when by the journal's clock."""
    owner: str | None = None
    settled: tuple[Settled, ...] = ()
    """In-doubt calls the tool policy settled by itself since the save, oldest first."""
    repeats: tuple[CaughtRepeat, ...] = ()
    """Repeats a tool policy caught since the save (journals of schema 4 on), oldest first."""
    ran: tuple[Ran, ...] = ()
    """Calls done since the save whose repeats their tool policy lets run, per tool (schema 7 on); not in
    ``done``, counted in ``done_total``."""
    refused: tuple[Refused, ...] = ()
    """Calls a limit or budget refused since the save (schema 7 on), oldest first."""


@dataclass(frozen=True)
class CaughtRepeat:
    """A call the agent sent again, caught by a tool policy (an event of kind ``repeat``)."""

    workflow: str
    seq: int
    """The original call's sequence."""
    tool: str
    action: str
    """``replayed``, ``refused``, ``in_doubt``, ``in_flight``, ``ran_again``, ``confirm_asked`` or ``confirmed``
    (see ``intercept/repeats.py``)."""
    at: str


def _short(arguments: str) -> str | None:
    if arguments == REDACTED_ARGUMENTS:
        return None
    return arguments if len(arguments) <= SHORT_ARGUMENTS else arguments[: SHORT_ARGUMENTS - 1] + "…"


def _call(row: Sequence[Any]) -> Call:
    call = Call(row[0], int(row[1]), row[2], _short(row[3]), CallState(row[4]), row[5], row[6])
    if len(row) > 7:
        call = replace(call, tool_error=bool(row[7]), repeat_rule=row[8], rule=row[9] if len(row) > 9 else None)
    return call


def _range(start: int, limit: int | None) -> tuple[str, tuple[Any, ...]]:
    if limit is None:
        return " AND seq >= ?", (start,)
    return " AND seq >= ? AND seq < ?", (start, limit)


class JournalReader(ABC):
    """A journal opened read-only for digests; ``open_reader`` picks the database."""

    location: str
    schema: int = OLDEST_SCHEMA
    """The journal's schema version, read at open."""

    @abstractmethod
    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of one read-only statement (``?`` placeholders).

        Raises:
            JournalUnavailable: the journal cannot be read.
        """

    @abstractmethod
    def owner_since(self, root: str) -> tuple[str, str] | None:
        """(since, description) of the live proxy owning ``root``'s lineage, or None."""

    @abstractmethod
    def replica_alive(self, replica_id: str) -> bool:
        """True while the replica ``replica_id`` (a proxy sharing a workflow, a gateway replica) is alive, read
        without taking its lock."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    # ---- portable reads ----------------------------------------------------------------------------------

    def lineage(self, workflow: str) -> Lineage:
        """The lineage a proxy with ``--workflow-id workflow`` writes to, read without registering anything."""
        found = self.rows("SELECT root_id FROM workflows WHERE workflow_id = ?", (workflow,))
        if not found:
            return lineage_from_rows(workflow, [])
        rows = self.rows(
            "SELECT workflow_id, parent_id, fork_seq, created_at, collected_through FROM workflows WHERE root_id = ?",
            (found[0][0],),
        )
        return lineage_from_rows(workflow, rows)

    def _max_resolution(self) -> int:
        return int(self.rows("SELECT max(id) FROM resolutions")[0][0] or 0)

    def _last(self, lineage: Lineage) -> tuple[int, str | None]:
        best = 0
        for branch, start, limit in lineage.ranges():
            where, params = _range(start, limit)
            found = self.rows(f"SELECT max(seq) FROM calls WHERE workflow_id = ?{where}", (branch.workflow, *params))
            best = max(best, int(found[0][0] or 0))
        if best == 0:
            return 0, None
        row = self.rows(
            "SELECT started_at FROM calls WHERE workflow_id = ? AND seq = ?", (lineage.branch_at(best).workflow, best)
        )
        return best, row[0][0] if row else None

    def mark(self, workflow: str) -> Mark | None:
        """Where ``workflow`` stands now, to be saved with a checkpoint; None if too much is in flight to list.

        Raises:
            JournalUnavailable: the journal cannot be read.
        """
        lineage = self.lineage(workflow)
        last_seq, last_at = self._last(lineage)
        counts: Counter[str] = Counter()
        pending: list[int] = []
        for branch, start, limit in lineage.ranges():
            where, params = _range(start, limit)
            for state, count in self.rows(
                f"SELECT state, count(*) FROM calls WHERE workflow_id = ?{where} GROUP BY state",
                (branch.workflow, *params),
            ):
                counts[state] += int(count)
            if counts[CallState.PENDING.value] > len(pending):
                pending += [
                    int(row[0])
                    for row in self.rows(
                        f"SELECT seq FROM calls WHERE workflow_id = ? AND state = 'PENDING'{where}",
                        (branch.workflow, *params),
                    )
                ]
        if len(pending) > PENDING_MARK_MAX:
            return None
        return Mark(
            head=lineage.head,
            last_seq=last_seq,
            last_at=last_at,
            calls=sum(counts.values()),
            completed=counts[CallState.COMPLETED.value],
            failed=counts[CallState.FAILED.value],
            pending=tuple(sorted(pending)),
            resolutions=self._max_resolution(),
        )

    def digest(self, workflow: str, mark: Mark | None, saved_at: str | None) -> Digest:
        """What happened to ``workflow``'s side effects since the save at ``saved_at`` (whose mark is ``mark``);
        with ``saved_at`` None (no save), since the workflow began.

        Raises:
            JournalUnavailable: the journal cannot be read.
        """
        lineage = self.lineage(workflow)
        if saved_at is None:
            # The origin as a mark: every call is "since", read by sequence with the same caps as after a save.
            digest = self._since_mark(lineage, Mark(lineage.head, 0, None, 0, 0, 0, (), 0))
            saved_at = ""
        elif mark is not None and self._still_valid(lineage, mark):
            digest = self._since_mark(lineage, mark)
        else:
            digest = self._since_time(lineage, saved_at)
        digest = replace(self._with_owner(lineage, digest), settled=self._settled(lineage, saved_at))
        if self.schema < _EVENTS_SCHEMA:
            return digest
        digest = replace(digest, repeats=self._repeats(lineage, saved_at))
        if self.schema < _POLICY_SCHEMA:
            return digest
        return replace(digest, refused=self._refused(lineage, saved_at))

    @property
    def _columns(self) -> str:
        if self.schema >= _RULE_SCHEMA:
            return _COLUMNS_8
        return _COLUMNS_7 if self.schema >= _POLICY_SCHEMA else _COLUMNS

    def _refused(self, lineage: Lineage, saved_at: str) -> tuple[Refused, ...]:
        """The calls a limit or budget refused since the save, on every branch of the lineage."""
        found: list[Refused] = []
        for branch in lineage.branches:
            rows = self.rows(
                f"SELECT detail, at FROM events WHERE workflow_id = ? AND kind = 'limit' AND at > ?"
                f" ORDER BY id DESC LIMIT {REPEATS_FETCH}",
                (branch.workflow, saved_at),
            )
            for detail, at in rows:
                try:
                    fields = json.loads(detail)
                except ValueError:
                    continue
                after = fields.get("runsAgainAfter")
                tool, reason = str(fields.get("tool")), str(fields.get("reason"))
                found.append(Refused(branch.workflow, tool, reason, at, after if isinstance(after, str) else None))
        return tuple(sorted(found, key=lambda r: r.at))

    def _repeats(self, lineage: Lineage, saved_at: str) -> tuple[CaughtRepeat, ...]:
        """The repeats caught since the save, on every branch of the lineage (``events_by_workflow`` index)."""
        found: list[CaughtRepeat] = []
        for branch in lineage.branches:
            rows = self.rows(
                f"SELECT seq, detail, at FROM events WHERE workflow_id = ? AND kind = 'repeat' AND at > ?"
                f" ORDER BY id LIMIT {REPEATS_FETCH}",
                (branch.workflow, saved_at),
            )
            for seq, detail, at in rows:
                try:
                    fields = json.loads(detail)
                except ValueError:
                    continue
                tool, action = fields.get("tool"), fields.get("action")
                found.append(CaughtRepeat(branch.workflow, int(seq), str(tool), str(action), at))
        return tuple(sorted(found, key=lambda r: r.at))

    def _settled(self, lineage: Lineage, saved_at: str) -> tuple[Settled, ...]:
        """The settlements of in-doubt calls the tool policy made by itself after ``saved_at``."""
        found: list[Settled] = []
        for branch, start, limit in lineage.ranges():
            where, params = _range(start, limit)
            rows = self.rows(
                "SELECT r.workflow_id, r.seq, c.tool, r.action, r.resolved_by, r.at FROM resolutions r"
                " LEFT JOIN calls c ON c.workflow_id = r.workflow_id AND c.seq = r.seq"
                f" WHERE r.workflow_id = ?{where.replace('seq', 'r.seq')} AND r.resolved_by LIKE ? AND r.at > ?"
                " ORDER BY r.id",
                (branch.workflow, *params, SETTLED_BY, saved_at),
            )
            for workflow, seq, tool, action, by, at in rows:
                found.append(Settled(workflow, int(seq), tool, action, str(by)[len("checkpoint (") : -1], at))
        return tuple(sorted(found, key=lambda s: s.at))

    def _still_valid(self, lineage: Lineage, mark: Mark) -> bool:
        """True when every row written since the save has a sequence above the mark."""
        if lineage.head != mark.head:
            return False  # forked since: the new branch has rows below the mark
        last_seq, _ = self._last(lineage)
        if last_seq < mark.last_seq:
            return False  # another journal, or rows removed since
        if mark.last_seq:
            row = self.rows(
                "SELECT started_at FROM calls WHERE workflow_id = ? AND seq = ?",
                (lineage.branch_at(mark.last_seq).workflow, mark.last_seq),
            )
            if not row or row[0][0] != mark.last_at:
                return False
        released = self.rows(
            "SELECT count(*) FROM resolutions WHERE id > ? AND action = 'released'", (mark.resolutions,)
        )
        if int(released[0][0]):
            return False  # a released sequence may have been taken again below the mark
        if mark.calls == mark.last_seq:
            return True  # no free sequence below the mark at the save, and none freed since
        total = 0
        for branch, start, limit in lineage.ranges():
            where, params = _range(start, limit)
            found = self.rows(
                f"SELECT count(*) FROM calls WHERE workflow_id = ?{where} AND seq <= ?",
                (branch.workflow, *params, mark.last_seq),
            )
            total += int(found[0][0])
        return total == mark.calls

    def _since_mark(self, lineage: Lineage, mark: Mark) -> Digest:
        pending: list[Call] = []
        done: list[Call] = []
        ran: list[Ran] = []
        by_tool: Counter[str] = Counter()
        for branch, start, limit in lineage.ranges():
            if limit is not None and limit <= mark.last_seq + 1:
                continue
            where, params = _range(max(start, mark.last_seq + 1), limit)
            key = (branch.workflow, *params)
            pending += map(
                _call,
                self.rows(f"SELECT {self._columns} FROM calls WHERE workflow_id = ?{where} AND state = 'PENDING'", key),
            )
            for tool, state, count in self.rows(
                f"SELECT tool, state, count(*) FROM calls WHERE workflow_id = ?{where} GROUP BY tool, state", key
            ):
                if state != CallState.PENDING.value:
                    by_tool[tool] += int(count)
            listed = f" AND NOT ({_RAN})" if self.schema >= _POLICY_SCHEMA else ""
            done += map(
                _call,
                self.rows(
                    f"SELECT {self._columns} FROM calls WHERE workflow_id = ?{where} AND state <> 'PENDING'{listed}"
                    f" ORDER BY seq DESC LIMIT {DONE_FETCH}",
                    key,
                ),
            )
            if self.schema >= _POLICY_SCHEMA:
                for tool, count, first, last in self.rows(
                    f"SELECT tool, count(*), min(seq), max(seq) FROM calls WHERE workflow_id = ?{where} AND {_RAN}"
                    " GROUP BY tool ORDER BY min(seq)",
                    key,
                ):
                    ran.append(Ran(branch.workflow, str(tool), int(count), int(first), int(last)))
        for seq in mark.pending:
            found = self.rows(
                f"SELECT {self._columns} FROM calls WHERE workflow_id = ? AND seq = ?",
                (lineage.branch_at(seq).workflow, seq),
            )
            if not found:
                continue
            call = _call(found[0])
            if call.state is CallState.PENDING:
                pending.append(call)
            else:  # in flight at the save, finished (or resolved) since
                done.append(call)
                by_tool[call.tool] += 1
        return Digest(
            head=lineage.head,
            in_doubt=tuple(sorted(pending, key=lambda c: c.seq)),
            done=_newest_last(done)[-DONE_FETCH:],
            done_total=sum(by_tool.values()),
            done_by_tool=dict(by_tool),
            before={"completed": mark.completed, "failed": mark.failed},
            ran=tuple(ran),
        )

    def _since_time(self, lineage: Lineage, saved_at: str) -> Digest:
        pending: list[Call] = []
        done: list[Call] = []
        before: Counter[str] = Counter()
        for branch, start, limit in lineage.ranges():
            where, params = _range(start, limit)
            for row in self.rows(
                f"SELECT {self._columns} FROM calls WHERE workflow_id = ?{where}"
                " AND (state = 'PENDING' OR finished_at > ?)",
                (branch.workflow, *params, saved_at),
            ):
                call = _call(row)
                (pending if call.state is CallState.PENDING else done).append(call)
            for state, count in self.rows(
                f"SELECT state, count(*) FROM calls WHERE workflow_id = ?{where} AND finished_at <= ? GROUP BY state",
                (branch.workflow, *params, saved_at),
            ):
                before[str(state).lower()] += int(count)
        listed, ran = _counted_apart(done)
        return Digest(
            head=lineage.head,
            in_doubt=tuple(sorted(pending, key=lambda c: c.seq)),
            done=_newest_last(listed)[-DONE_FETCH:],
            done_total=len(done),
            done_by_tool=dict(Counter(call.tool for call in done)),
            before={"completed": before["completed"], "failed": before["failed"]},
            ran=ran,
            exact=False,
        )

    def _with_owner(self, lineage: Lineage, digest: Digest) -> Digest:
        """Split PENDING calls: those a live owner sent after it took the workflow, and those a live replica
        reserved (a proxy that shares the workflow, a gateway replica), are in flight, not in doubt."""
        if not digest.in_doubt:
            return digest
        owner = self.owner_since(lineage.root)
        running = self._running_on_replicas(lineage)
        if owner is None and not running:
            return digest
        since, described = owner if owner is not None else ("\uffff", None)
        flying = tuple(c for c in digest.in_doubt if c.started_at >= since or (c.workflow, c.seq) in running)
        doubt = tuple(c for c in digest.in_doubt if c.started_at < since and (c.workflow, c.seq) not in running)
        return replace(digest, in_doubt=doubt, in_flight=flying, owner=described)

    def _running_on_replicas(self, lineage: Lineage) -> set[tuple[str, int]]:
        """The PENDING calls of ``lineage`` a live replica reserved (schema 3 on)."""
        if self.schema < _REPLICAS_SCHEMA:
            return set()
        workflows = [branch.workflow for branch in lineage.branches]
        marks = ", ".join("?" for _ in workflows)
        rows = self.rows(
            "SELECT workflow_id, seq, replica_id FROM calls"
            f" WHERE workflow_id IN ({marks}) AND state = 'PENDING' AND replica_id IS NOT NULL",
            workflows,
        )
        alive: dict[str, bool] = {}
        running: set[tuple[str, int]] = set()
        for workflow, seq, replica in rows:
            if replica not in alive:
                alive[replica] = self.replica_alive(str(replica))
            if alive[replica]:
                running.add((str(workflow), int(seq)))
        return running


def _counted_apart(calls: Sequence[Call]) -> tuple[list[Call], tuple[Ran, ...]]:
    """The calls to list, and those whose repeats their tool policy lets run, counted per tool."""
    listed: list[Call] = []
    ran: dict[tuple[str, str], Ran] = {}
    for call in sorted(calls, key=lambda c: c.seq):
        if call.repeat_rule == "allow" and call.state is CallState.COMPLETED and not call.tool_error:
            known = ran.get((call.workflow, call.tool))
            ran[(call.workflow, call.tool)] = (
                Ran(call.workflow, call.tool, 1, call.seq, call.seq)
                if known is None
                else replace(known, count=known.count + 1, last=call.seq)
            )
        else:
            listed.append(call)
    return listed, tuple(ran.values())


def _newest_last(calls: Sequence[Call]) -> tuple[Call, ...]:
    return tuple(sorted(calls, key=lambda c: (c.finished_at or c.started_at, c.seq)))
