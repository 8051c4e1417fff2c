"""The journal for fleets: PostgreSQL through psycopg 3, shared by many proxies on many hosts.

Only what differs from SQLite lives here: the connection (autocommit, explicit transactions; a commit is
durable under PostgreSQL's defaults), the schema's dialect and its version table, ownership as a session-level
advisory lock, and recovery from a lost connection. Ownership dies with the owner's session, so a proxy whose
process or host dies loses it the moment its connection drops, and the next proxy takes over with no cleanup.

A lost connection is retried (``RECONNECT_DELAYS``) at the next journal operation; after reconnecting, the
proxy takes its advisory locks again: if another proxy took a workflow meanwhile, that is fatal (``JournalLost``)
and the proxy exits. The URL's password never appears in a log line or an error.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import (
    JournalCorrupt,
    JournalLost,
    JournalUnavailable,
    JournalVersionError,
    UsageError,
    WorkflowOwned,
    WorkflowShared,
)
from checkpoint_mcp.journal import chain, pgwrites, scrubbed, without_password
from checkpoint_mcp.journal.base import OwnerInfo, Ownership, described
from checkpoint_mcp.journal.chain import start_chains
from checkpoint_mcp.journal.identity import Found, postgres_identity
from checkpoint_mcp.journal.replicas import NOTIFY_CHANNEL, ReplicaPresence, replica_lock_key
from checkpoint_mcp.journal.rows import FINISH_CALL
from checkpoint_mcp.journal.schema import POSTGRES_APPLICATION, SCHEMA_VERSION, schema
from checkpoint_mcp.journal.sql import TAKE_BLOCK, Group, SqlJournal
from checkpoint_mcp.journal.statements import Cursor

try:
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

APPLICATION = POSTGRES_APPLICATION
CONNECT_TIMEOUT_SECONDS = 5
RECONNECT_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0)  # about 8 s in all before the journal is declared lost
LOCK_RETRY_SECONDS = 0.5  # an operator's `ls` probes locks for an instant; a starting proxy waits that long
MIGRATION_LOCK = 0x43484B50  # advisory lock id serialising schema migrations of one database

_COMMON = schema(big_integer="BIGINT", identity="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # PostgreSQL keeps the version in a table (SQLite has PRAGMA user_version) and the owners beside the locks.
    1: ("CREATE TABLE checkpoint_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)", *_COMMON[1]),
    2: (
        *_COMMON[2],
        "CREATE TABLE owners (root_id TEXT PRIMARY KEY, pid BIGINT NOT NULL, host TEXT NOT NULL,"
        " since TEXT NOT NULL, command TEXT NOT NULL)",
    ),
    3: _COMMON[3],
    4: _COMMON[4],
    5: _COMMON[5],
    6: _COMMON[6],
    7: _COMMON[7],
    8: _COMMON[8],
}
"""version -> statements that bring a journal from version-1 to version."""


def lock_key(root: str) -> int:
    """The advisory lock id of a workflow lineage: 64 bits of SHA-256, as a signed bigint."""
    return int.from_bytes(hashlib.sha256(root.encode()).digest()[:8], "big", signed=True)


def turns_key(names: Sequence[str]) -> int:
    """The advisory lock id of what ``names`` name (``take_turns``): 64 bits of SHA-256 of the names joined by
    NUL, as a signed bigint. The first name says what kind of thing it is (``repeat``, ``approval``, ``metered``),
    so two kinds never share a lock; a lineage's own lock (``lock_key``) hashes a single root id, never NUL-joined."""
    digest = hashlib.sha256("\0".join(("turns", *names)).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_LOCK_WORKFLOW = "SELECT 1 FROM workflows WHERE workflow_id = %s FOR UPDATE"
_HEAD = chain.HEAD.replace("?", "%s")
_TAKE_BLOCK = "SET LOCAL synchronous_commit TO OFF; " + TAKE_BLOCK.replace("max(next_seq", "greatest(next_seq").replace(
    "?", "%s"
)


@functools.lru_cache(maxsize=256)
def _dialect(sql: str) -> str:
    return sql.replace("?", "%s")


class _Entered:
    """An already-entered psycopg transaction, exited by the ``with`` that follows."""

    def __init__(self, transaction: Any) -> None:
        self._transaction = transaction

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> Any:
        return self._transaction.__exit__(*exc)


class _AdvisoryOwnership(Ownership):
    def __init__(self, journal: PostgresJournal, root: str, shared: bool) -> None:
        self._journal = journal
        self._root: str | None = root
        self.shared = shared

    def release(self) -> None:
        if self._root is not None:
            self._journal.release_root(self._root, self.shared)
            self._root = None

    def take_alone(self) -> bool:
        """See ``Ownership.take_alone``: the exclusive lock taken beside the shared one (a session's own locks never
        conflict), which is then let go; refused while another session holds either."""
        if not self.shared:
            return True
        assert self._root is not None
        if not self._journal.take_alone(self._root):
            return False
        self.shared = False
        return True


class PostgresJournal(SqlJournal):
    """A journal in a PostgreSQL database."""

    def __init__(self, url: str, *, create: bool = True, audit_key: bytes | None = None) -> None:
        """Connect, check the schema and create or migrate it (unless ``create`` is False: then it must exist).

        ``audit_key`` authenticates the links this process adds to the hash chain (HMAC-SHA-256).

        Raises:
            UsageError: psycopg is not installed (the ``postgres`` extra).
            JournalUnavailable: the database cannot be reached, or (``create=False``) holds no journal.
            JournalCorrupt: the database holds tables that are not a Checkpoint journal.
            JournalVersionError: the journal was written by a newer Checkpoint (``create=False``: or an older one).
        """
        if psycopg is None:
            raise UsageError("a PostgreSQL journal needs psycopg: pip install 'checkpoint-mcp[postgres]'")
        super().__init__()
        self._url = url
        self.audit_key = audit_key
        self.location = without_password(url)
        self._owned: dict[str, OwnerInfo] = {}
        self._application = "checkpoint"  # a replica's sessions carry its name, for pg_stat_activity
        self._conn: Any = None
        self._shared: set[str] = set()  # roots this process shares (a shared advisory lock each)
        self._connect()
        try:
            self._prepare(create)
        except BaseException:
            self.close()
            raise

    # ---- connection ---------------------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return scrubbed(text, self._url)

    @contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        """The one seam where psycopg's exceptions become ours (and lose any credential)."""
        assert psycopg is not None
        try:
            yield
        except (psycopg.OperationalError, psycopg.IntegrityError) as exc:
            raise JournalUnavailable(f"cannot {action} journal {self.location}: {self._scrub(str(exc))}") from None
        except psycopg.Error as exc:
            raise JournalCorrupt(f"cannot {action} journal {self.location}: {self._scrub(str(exc))}") from None

    def _connect(self) -> None:
        assert psycopg is not None
        with self._translated("connect to"):
            # Custom plans only: a generic plan, made from an almost empty table's statistics, had the finish UPDATE
            # scan its whole workflow by ``calls_by_signature`` (1.2 ms a call at 3,000 rows, growing; auto_explain).
            self._conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                application_name=self._application,
                options="-c plan_cache_mode=force_custom_plan",
            )

    def _healthy(self) -> bool:
        return self._conn is not None and not self._conn.closed and not self._conn.broken

    def _ensure_connected(self) -> None:
        """Reconnect after a lost connection (bounded), then take back the workflows this process owned.

        Raises:
            JournalLost: the database stayed unreachable, or another process took an owned workflow meanwhile.
        """
        if self._healthy():
            return
        owned = list(self._owned)
        started = time.monotonic()
        last = "connection lost"
        for attempt, delay in enumerate((0.0, *RECONNECT_DELAYS), 1):
            time.sleep(delay)
            try:
                self._connect()
            except JournalUnavailable as exc:
                last = str(exc)
                logger.warning("journal connection lost; reconnect attempt %d failed: %s", attempt, last)
                continue
            logger.warning("reconnected to the journal %s after %.1fs", self.location, time.monotonic() - started)
            self._sequences.forget()
            for root in owned:
                if not self._try_lock(root):
                    del self._owned[root]
                    raise JournalLost(
                        f"ownership of workflow {root!r} was lost while the connection to {self.location} was down, "
                        "and another proxy now owns it; this proxy must stop"
                    )
            for root in list(self._shared):
                if not self._try_lock(root, shared=True):
                    self._shared.discard(root)
                    raise JournalLost(
                        f"this proxy's share of workflow {root!r} was lost while the connection to {self.location} "
                        "was down, and another proxy now owns it alone; this proxy must stop"
                    )
            return
        raise JournalLost(
            f"the journal {self.location} stayed unreachable for {time.monotonic() - started:.0f}s "
            f"({len(RECONNECT_DELAYS) + 1} attempts): {last}"
        )

    def _prepare(self, create: bool) -> None:
        with self._translated("open"), self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            version = self._schema_version()
            if not create and version == 0:
                raise JournalUnavailable(
                    f"there is no journal in {self.location} (this command opens an existing journal, "
                    "it never creates one)"
                )
            if version > SCHEMA_VERSION or (not create and version < SCHEMA_VERSION):
                raise JournalVersionError(version, SCHEMA_VERSION)
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    self._conn.execute(statement)
                if target == 4 and version > 0:
                    started = start_chains(self.execute, self.audit_key, version, utc_now())
                    logger.info("journal %s: %d hash chain(s) start at this migration", self.location, started)
                logger.info("journal %s migrated to schema version %d", self.location, target)
            if version < SCHEMA_VERSION:
                self._conn.execute(
                    "INSERT INTO checkpoint_meta (key, value) VALUES ('application', %s), ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (APPLICATION, str(SCHEMA_VERSION)),
                )

    def _schema_version(self) -> int:
        """The version of the journal here (``identity.py``), 0 where there is none yet."""
        found, version = postgres_identity(self._conn.execute)
        if found is Found.UNMARKED:
            raise JournalCorrupt(
                f"{self.location} has a 'calls' table but is not a Checkpoint journal; refusing to touch it"
            )
        if found is Found.FOREIGN:
            raise JournalCorrupt(f"{self.location} is not a Checkpoint journal; refusing to touch it")
        return version

    # ---- SqlJournal hooks ---------------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement (``?`` placeholders) on the journal's connection."""
        cursor: Cursor = self._conn.execute(_dialect(sql), tuple(params))
        return cursor

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN … COMMIT on a live connection (reconnecting first if it was lost).

        Raises:
            JournalUnavailable: the transaction could not start or commit (its writes are gone, or, if the
                connection broke during COMMIT, possibly not: the rows it wrote are then PENDING, in doubt).
            JournalLost: the database stayed unreachable, or ownership was lost meanwhile.
        """
        self._ensure_connected()
        transaction = self._begin()
        with self._translated("write"), transaction:
            yield

    def _once_more_if_dead(self, step: Callable[[], _T]) -> _T:
        """``step`` on a live connection; if it finds the connection dead, again once on a new one (for steps
        that commit nothing, or whose commit is harmless to repeat).

        Raises:
            JournalUnavailable: as ``step``, on a live connection or twice.
            JournalLost: the database stayed unreachable, or ownership was lost meanwhile.
        """
        self._ensure_connected()
        try:
            return step()
        except JournalUnavailable:
            if not self._conn.broken:
                raise
            logger.warning("the journal connection was lost; reconnecting")
            self._ensure_connected()
            return step()

    def _begin(self) -> Any:
        """Enter a transaction; a connection found dead at BEGIN (nothing sent yet) is replaced once, silently.

        Raises:
            JournalUnavailable: BEGIN failed on a live connection.
            JournalLost: the database stayed unreachable, or ownership was lost meanwhile.
        """
        assert psycopg is not None
        transaction = self._conn.transaction()
        try:
            transaction.__enter__()
        except psycopg.OperationalError as exc:
            if not self._conn.broken:
                raise JournalUnavailable(f"cannot write journal {self.location}: {self._scrub(str(exc))}") from None
            logger.warning("the journal connection was lost; reconnecting")
            self._ensure_connected()
            transaction = self._conn.transaction()
            with self._translated("write"):
                transaction.__enter__()
        return _Entered(transaction)

    def write(self, groups: list[Group], durable: bool = True) -> None:
        """BEGIN … COMMIT around the statements, always durably (``--relaxed-completions`` is SQLite's only). A
        commit that finishes calls notifies the replicas waiting for them (NOTIFY is delivered at COMMIT, so a
        waiter never reads the row before it is durable).

        Two round trips, each a pipeline: BEGIN, the statements, and each event's workflow locked and its chain's
        head read (``chain_heads``'s order: a head is read only once its lock is held); then the links, the
        NOTIFY and COMMIT. A connection found dead in the first is replaced once and the write sent again, as a
        dead connection at BEGIN always was: no COMMIT was sent on it, so whatever it ran died with its session.
        A failure anywhere else rolls the transaction back.

        Raises:
            JournalUnavailable: nothing was written (or, if the connection broke during COMMIT, possibly all).
            JournalLost: the database stayed unreachable, or ownership was lost meanwhile.
        """
        queued, workflows, locks = self._once_more_if_dead(lambda: self._open_write(groups))
        with self._translated("write"):
            try:
                events = pgwrites.recorded(queued)
                heads = self._heads_read(workflows, locks)
                with self._conn.pipeline():
                    if events:
                        self.insert_links(chain.append(events, self.audit_key, lambda _: heads))
                    if self.replica_id is not None and any(sql is FINISH_CALL for sql, _, _ in groups):
                        self._conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, self.replica_id))
                    self._conn.execute("COMMIT")
            except BaseException:
                self._roll_back()
                raise

    def _open_write(self, groups: list[Group]) -> tuple[pgwrites.Pending, list[str], list[tuple[Any, Any]]]:
        """BEGIN, ``groups``' statements (``pgwrites``: an array statement per kind of row), each event's workflow
        locked and its head read, in one pipeline (rolled back if it fails): the events queued, their workflows,
        each lock's and head's cursor."""
        with self._translated("write"):
            try:
                with self._conn.pipeline():
                    self._conn.execute("BEGIN")
                    queued = pgwrites.queue_groups(self._conn.execute, self._executemany, groups)
                    workflows = sorted({event.workflow for event, _, _ in queued})
                    execute = self._conn.execute
                    locks = [(execute(_LOCK_WORKFLOW, (w,)), execute(_HEAD, (w,))) for w in workflows]
            except BaseException:
                self._roll_back()
                raise
        return queued, workflows, locks

    def _heads_read(self, workflows: list[str], locks: list[tuple[Any, Any]]) -> dict[str, str]:
        """The chain heads the pipeline read; a workflow the journal has not seen is created, locked, then read."""
        heads: dict[str, str] = {}
        for workflow, (lock, read) in zip(workflows, locks, strict=True):
            head = read
            if lock.fetchone() is None:
                self.lock_workflow(workflow)
                head = self._conn.execute(_HEAD, (workflow,))
            row = head.fetchone()
            heads[workflow] = row[0] if row else ""
        return heads

    def _roll_back(self) -> None:
        """End a write that failed: a pipeline that failed skipped what followed (COMMIT too) and left the
        transaction open or aborted, so ROLLBACK, on a live connection (a dead one took it along)."""
        assert psycopg is not None
        if not self._conn.broken and self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("ROLLBACK")

    def _executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """executemany in the open pipeline (the cursor stays open until the pipeline's results are read)."""
        self._conn.cursor().executemany(_dialect(sql), rows)

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """executemany (pipelined by psycopg) on the journal's connection."""
        with self._conn.cursor() as cursor:
            cursor.executemany(_dialect(sql), rows)

    def chain_heads(self, workflows: Sequence[str]) -> dict[str, str]:
        """Lock each workflow's row, then read its chain's head, in one round trip: one query of several
        statements (bound by psycopg on the client), each taking its own snapshot, so a head is read only once
        the lock before it is held."""
        assert psycopg is not None
        query = " ".join(f"{_LOCK_WORKFLOW}; {_dialect(chain.HEAD)};" for _ in workflows)
        params = [value for workflow in workflows for value in (workflow, workflow)]
        heads: dict[str, str] = {}
        missing: list[str] = []
        with psycopg.ClientCursor(self._conn) as cursor:
            cursor.execute(query, params)
            for index, workflow in enumerate(workflows):
                if index:
                    cursor.nextset()
                locked = cursor.fetchone() is not None
                cursor.nextset()
                row = cursor.fetchone()
                if locked:
                    heads[workflow] = row[0] if row else ""
                else:
                    missing.append(workflow)
        for workflow in missing:  # an event names a workflow the journal has not seen: lock it, then read
            self.lock_workflow(workflow)
            row = self._conn.execute(_dialect(chain.HEAD), (workflow,)).fetchone()
            heads[workflow] = row[0] if row else ""
        return heads

    def insert_links(self, rows: Sequence[Sequence[Any]]) -> None:
        """One INSERT of every row: its columns as arrays (``pgwrites``), or a few rows as VALUES."""
        if len(rows) >= pgwrites.ARRAY_ROWS:
            self._conn.execute(pgwrites.INSERT_LINKS, pgwrites.columns(rows))
            return
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
        self._conn.execute(
            f"INSERT INTO events (workflow_id, seq, kind, detail, at, prev_hash, hash) VALUES {values}",
            [value for row in rows for value in row],
        )

    def lock_workflow(self, workflow: str) -> None:
        """Lock the workflow's row until the transaction ends (creating the row if an event names a workflow the
        journal has not seen), so that replicas appending to one chain take turns: each reads the head the
        previous one committed."""
        if self._conn.execute(_LOCK_WORKFLOW, (workflow,)).fetchone():
            return
        self._conn.execute(
            "INSERT INTO workflows (workflow_id, root_id, created_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (workflow_id) DO NOTHING",
            (workflow, workflow, utc_now()),
        )
        self._conn.execute(_LOCK_WORKFLOW, (workflow,))

    def take_turns(self, *names: str) -> None:
        """Wait for, then hold until the transaction ends, the advisory lock of what ``names`` name: replicas
        testing the same condition take turns, each seeing what the one before committed (READ COMMITTED: every
        statement after the lock reads a fresh snapshot)."""
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (turns_key(names),))

    def errors(self, action: str) -> AbstractContextManager[None]:
        """Translate psycopg errors (credentials scrubbed)."""
        return self._translated(action)

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Reads on a live connection, with errors translated."""
        self._ensure_connected()
        with self._translated("read"):
            yield

    # ---- ownership ----------------------------------------------------------------------------------------

    def _try_lock(self, root: str, shared: bool = False) -> bool:
        call = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        row = self._conn.execute(f"SELECT {call}(%s)", (lock_key(root),)).fetchone()
        return bool(row[0])

    def acquire(self, root: str, command: str = "checkpoint", *, shared: bool = False) -> Ownership:
        """Take the advisory lock of ``root``'s lineage on this session, exclusive (and record who we are) or
        ``shared``.

        Raises:
            WorkflowOwned: another live session holds it alone, or (not ``shared``) others share it
                (``WorkflowShared``).
        """
        self._ensure_connected()
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        with self._translated("lock a workflow in"):
            while not self._try_lock(root, shared):
                if time.monotonic() >= deadline:
                    owner = self._recorded_owner(root)
                    if not shared and self.owner(root) is None:  # held, but by sharers only
                        raise WorkflowShared(root, described(self.sharers(root)))
                    raise WorkflowOwned(root, owner.describe() if owner else "another session")
                time.sleep(0.02)
            if shared:
                self._shared.add(root)
                return _AdvisoryOwnership(self, root, shared=True)
            self._owned[root] = self._write_owner(root, command)
        return _AdvisoryOwnership(self, root, shared=False)

    def take_alone(self, root: str) -> bool:
        """Own ``root``'s lineage alone, which this session shares: True once it does (the shared lock let go), False
        while another session holds the lock (nothing changed)."""
        self._ensure_connected()
        with self._translated("lock a workflow in"):
            if not self._try_lock(root):
                return False
            self._conn.execute("SELECT pg_advisory_unlock_shared(%s)", (lock_key(root),))
            self._shared.discard(root)
            self._owned[root] = self._write_owner(root, "checkpoint")
        return True

    def _write_owner(self, root: str, command: str) -> OwnerInfo:
        """Say who owns ``root``'s lineage alone now, in the owners table (what ``owner`` reads)."""
        info = OwnerInfo(os.getpid(), socket.gethostname(), utc_now(), command)
        self._conn.execute(
            "INSERT INTO owners (root_id, pid, host, since, command) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (root_id) DO UPDATE SET pid = excluded.pid, host = excluded.host,"
            " since = excluded.since, command = excluded.command",
            (root, info.pid, info.host, info.since, info.command),
        )
        return info

    def sharers(self, root: str) -> list[OwnerInfo]:
        """The database sessions that hold ``root``'s shared lock (``pg_locks``), each named by where it connects
        from, since when and its application name (a proxy's process id is not the database's)."""
        key = lock_key(root) & 0xFFFFFFFFFFFFFFFF
        with self.reading():
            rows = self._conn.execute(
                "SELECT coalesce(host(a.client_addr), 'local'), a.backend_start, a.application_name"
                " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ShareLock' AND l.pid <> pg_backend_pid()"
                " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid AND l.objsubid = 1"
                " ORDER BY a.backend_start",
                (key >> 32, key & 0xFFFFFFFF),
            ).fetchall()
        return [OwnerInfo(0, str(host), str(since), str(application)) for host, since, application in rows]

    def release_root(self, root: str, shared: bool = False) -> None:
        """Give up ``root``'s lock, exclusive or ``shared`` (no-op if the session is gone: so is the lock)."""
        if shared:
            self._shared.discard(root)
        else:
            self._owned.pop(root, None)
        if self._healthy():
            unlock = "pg_advisory_unlock_shared" if shared else "pg_advisory_unlock"
            with self._translated("unlock a workflow in"):
                self._conn.execute(f"SELECT {unlock}(%s)", (lock_key(root),))

    def _recorded_owner(self, root: str) -> OwnerInfo | None:
        row = self._conn.execute("SELECT pid, host, since, command FROM owners WHERE root_id = %s", (root,)).fetchone()
        return OwnerInfo(int(row[0]), row[1], row[2], row[3]) if row else None

    def owner(self, root: str) -> OwnerInfo | None:
        """The live owner: a shared-lock probe fails only while some session holds the lock exclusively."""
        if root in self._owned:
            return self._owned[root]
        with self.reading():
            key = lock_key(root)
            free = self._conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (key,)).fetchone()[0]
            if free:
                self._conn.execute("SELECT pg_advisory_unlock_shared(%s)", (key,))
                return None
            return self._recorded_owner(root) or OwnerInfo(0, "?", "?", "another session")

    # ---- replicas -----------------------------------------------------------------------------------------

    def register_replica(self, on_commit: Callable[[], None] | None = None) -> ReplicaPresence:
        """Become a live replica (a `checkpoint serve` replica, a proxy sharing workflows): a lock held on a
        connection of its own, which also listens for other replicas' commits (``on_commit`` is then called, from
        another thread).

        Raises:
            JournalUnavailable: the database cannot be reached.
        """
        with self._translated("register a replica in"):
            presence = ReplicaPresence(self._url, self.location, self._scrub, on_commit or (lambda: None))
            self._application = presence.application_name
            self._conn.execute("SELECT set_config('application_name', %s, false)", (self._application,))
        self.replica_id = presence.replica_id
        return presence

    def _take_block(self, workflow: str, size: int, *, wait: bool) -> int | None:
        """One atomic step of ``workflow``'s counter by ``size`` past every committed sequence: the block's last
        (None: no such workflow). One round trip: two statements in one query, one implicit transaction, so ``SET
        LOCAL`` applies; not durable (no WAL flush): it is once a reservation from its block commits (WAL is
        flushed in order), and a step lost in a crash is only taken again (see ``sequences``); sent again on a
        dead connection, a step leaves a gap at worst.
        """
        return self._once_more_if_dead(lambda: self._step_counter(workflow, size))

    def _step_counter(self, workflow: str, size: int) -> int | None:
        assert psycopg is not None
        with self._translated("allocate a sequence in"), psycopg.ClientCursor(self._conn) as cursor:
            cursor.execute(_TAKE_BLOCK, (workflow, size, workflow))
            cursor.nextset()
            row = cursor.fetchone()
        return int(row[0]) if row else None

    def replica_alive(self, replica_id: str) -> bool:
        """A shared-lock probe of the replica's lock fails only while that replica's session holds it."""
        if replica_id == self.replica_id:
            return True
        with self.reading():
            key = replica_lock_key(replica_id)
            free = self._conn.execute("SELECT pg_try_advisory_lock_shared(%s)", (key,)).fetchone()[0]
            if free:
                self._conn.execute("SELECT pg_advisory_unlock_shared(%s)", (key,))
            return not free

    def reopening(self) -> tuple[str, bytes | None, str | None]:
        """The database's URL (with its password), the audit key, and this replica's identity (its NOTIFYs)."""
        return self._url, self.audit_key, self.replica_id

    def close(self) -> None:
        """Give back the sequences held ahead, and close the connection (which releases every advisory lock it
        held)."""
        if self._conn is not None and not self._conn.closed:
            if self._healthy():
                self.give_back()
            self._conn.close()
