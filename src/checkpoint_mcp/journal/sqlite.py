"""The embedded journal: one SQLite file in WAL mode with ``synchronous=FULL``.

A commit returns only after the WAL is fsynced, so a PENDING row is on disk before the upstream is called and
a COMPLETED row before the client sees the reply (``--relaxed-completions`` commits outcomes alone with
``synchronous=NORMAL``: not synced, but a crash of the process keeps them). The file is identified by
``PRAGMA application_id`` and versioned by ``PRAGMA user_version``; a file that is not a Checkpoint journal, is
damaged, or was written by a newer Checkpoint is refused before anything is written to it.

Ownership of a workflow lineage is a lock on a small file in ``<journal>.owners/`` (``flock``, or a byte-range
lock: ``platforms.locks``), exclusive for a proxy that owns it alone, shared by proxies that share it
(``owner_lock``): the kernel releases it when the owner dies, however it dies, so a crashed proxy never has to be
cleaned up after.

The journal holds every call's arguments and results, so what it creates is owner-only whatever the umask: the
file is made 0600 before SQLite opens it (SQLite gives its ``-wal`` and ``-shm`` files the main file's mode), and
``.owners/`` 0700 with 0600 locks (where mode bits mean something: ``platforms.files``). An existing file open to
others is the user's choice: it is warned about, never changed. On macOS every sync is a full one
(``PRAGMA fullfsync``): a plain fsync leaves the data in the drive's cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import (
    JournalCorrupt,
    JournalLost,
    JournalUnavailable,
    JournalVersionError,
    WorkflowOwned,
    WorkflowShared,
)
from checkpoint_mcp.journal import chain, owner_lock
from checkpoint_mcp.journal.base import Batch, OwnerInfo, Ownership, Presence, described
from checkpoint_mcp.journal.chain import Event, start_chains
from checkpoint_mcp.journal.identity import Found, Identity, sqlite_identity
from checkpoint_mcp.journal.rows import FINISH_CALL
from checkpoint_mcp.journal.schema import SCHEMA_VERSION, SQLITE_APPLICATION_ID, schema
from checkpoint_mcp.journal.sql import TAKE_BLOCK, Group, SqlJournal, merged
from checkpoint_mcp.journal.statements import Cursor
from checkpoint_mcp.platforms import files, locks
from checkpoint_mcp.platforms.host import HOST

logger = logging.getLogger(__name__)
T = TypeVar("T")

APPLICATION_ID = SQLITE_APPLICATION_ID
BUSY_TIMEOUT_SECONDS = 5.0  # how long a writer waits for another process's transaction on the same file
LOCK_RETRY_SECONDS = 0.5  # an operator's `ls` probes locks for an instant; a starting proxy waits that long
FILE_MODE = files.FILE_MODE  # the journal, its -wal and -shm, and the ownership locks: they name every call's arguments
FOLDER_MODE = files.FOLDER_MODE  # <journal>.owners/
STALE_PRESENCE_SECONDS = 600  # an unheld presence lock this old is a killed replica's: removed at the next start
HEADS_REMEMBERED = 1024  # chain heads a connection remembers (a proxy writes a handful of chains; an operator's
# command that touches every workflow, many: past this, forgotten and read again, one SELECT each)

_HEAD_BEFORE = "SELECT hash FROM events WHERE workflow_id = ? AND id < ? ORDER BY id DESC LIMIT 1"
_UNLINK = "DELETE FROM events WHERE id >= ?"  # the links this transaction just inserted, from the first one

MIGRATIONS = schema(big_integer="INTEGER", identity="INTEGER PRIMARY KEY")
"""version -> statements that bring a journal from version-1 to version."""


@contextmanager
def _translated(location: str, action: str) -> Iterator[None]:
    """The one seam where sqlite3's exceptions become ours."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise _journal_error(location, action, exc) from exc


def _journal_error(location: str, action: str, exc: sqlite3.DatabaseError) -> JournalUnavailable | JournalCorrupt:
    """Our error for sqlite3's ``exc`` (see ``_translated``)."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        return JournalUnavailable(f"cannot {action} journal {location}: it conflicts with a journaled row ({text})")
    if isinstance(exc, sqlite3.OperationalError) or "locked" in text or "readonly" in text:
        return JournalUnavailable(f"cannot {action} journal {location}: {text}")
    return JournalCorrupt(f"cannot {action} journal {location}: {text} (is it a Checkpoint journal?)")


def _busy(exc: Exception) -> bool:
    """Whether the error (sqlite3's, or ours made of it) says another connection held a lock on the file
    (SQLITE_BUSY / SQLITE_LOCKED)."""
    text = str(exc)
    return "locked" in text or "busy" in text


def _while_busy(action: Callable[[], T]) -> T:
    """Run ``action``, retrying while another process holds a lock SQLite does not wait for (bounded).

    Raises:
        JournalUnavailable: still locked after BUSY_TIMEOUT_SECONDS, or any other failure.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            return action()
        except JournalUnavailable as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _create_owner_only(path: str) -> None:
    """Create an empty journal file with mode 0600 (whatever the umask), unless one is already there; SQLite
    then makes a new journal of it and gives its -wal and -shm files the same mode.

    Raises:
        JournalUnavailable: the file cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return  # another process created it first: it is theirs to have made, and is checked like any other
    except OSError as exc:
        raise JournalUnavailable(f"cannot open journal {path}: {exc.strerror}") from exc
    try:
        files.restrict(fd, FILE_MODE)
    finally:
        os.close(fd)


def _warn_if_shared(path: str) -> None:
    """One line on stderr (the log) when an existing journal file is readable or writable by group or others."""
    mode = files.open_to_others(path)
    if mode is not None:
        shared = " ".join(p for p in (path, path + "-wal", path + "-shm") if os.path.exists(p))
        logger.warning(
            "journal %s is open to other users (mode %04o) and holds every call's arguments and results; "
            "to make it owner-only: chmod 600 %s",
            path,
            mode,
            shared,
        )


def _open_lock(path: str) -> int:
    """Open the ownership lock at ``path`` for writing, creating it 0600 (whatever the umask) if it is missing.

    Raises:
        OSError: it cannot be opened or created.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | files.BINARY, FILE_MODE)
    except FileExistsError:
        return os.open(path, os.O_RDWR | files.BINARY)
    files.restrict(fd, FILE_MODE)
    return fd


class _FileOwnership(Ownership):
    def __init__(self, fd: int, path: str, root: str, command: str, shared: bool) -> None:
        self._fd: int | None = fd
        self._path = path
        self._root = root
        self._command = command
        self.shared = shared

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def take_alone(self) -> bool:
        """See ``Ownership.take_alone``: the shared lock converted to an exclusive one, when nobody else holds it
        (``locks.take_alone``); it can fail only if an exclusive owner came in between a conversion that drops the
        shared lock first."""
        if not self.shared:
            return True
        assert self._fd is not None
        try:
            if not locks.take_alone(self._fd):
                return False
        except locks.LockLost:
            raise JournalLost(
                f"this proxy lost its share of workflow {self._root!r}: another proxy took it alone"
            ) from None
        self.shared = False
        owner_lock.write_owner(self._fd, self._root, self._command)
        return True


class _FilePresence:
    """A live replica of an SQLite journal: an exclusive lock of its own (``owner_lock.presence_path``), which
    names the lineages it shares, removed when it closes."""

    alive = True  # a file lock is the kernel's: it is lost only with the process
    lost_reason: str | None = None

    def __init__(self, replica_id: str, fd: int, path: str) -> None:
        self.replica_id = replica_id
        self._fd: int | None = fd
        self._path = path
        self._shares: list[str] = []

    def share(self, root: str) -> None:
        """Name ``root`` among the lineages this replica shares (``owner_lock.sharers``)."""
        if self._fd is not None and root not in self._shares:
            self._shares.append(root)
            owner_lock.write_owner(self._fd, owner_lock.presence_root(self.replica_id), "checkpoint", self._shares)

    def close(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self._path)  # still held: nobody can take it for a live replica meanwhile
        os.close(self._fd)  # closing the descriptor drops the lock
        self._fd = None
        if HOST.platform == "win32":  # an open file cannot be removed there: it goes once closed
            with contextlib.suppress(OSError):
                os.unlink(self._path)


class SqliteJournal(SqlJournal):
    """A journal in one SQLite file; several processes may use it at once, on one workflow lineage or on many."""

    def __init__(self, path: str, *, create: bool = True, audit_key: bytes | None = None) -> None:
        """Open the journal at ``path``, creating it if needed unless ``create`` is False.

        ``audit_key`` authenticates the links this process adds to the hash chain (HMAC-SHA-256).

        Raises:
            JournalUnavailable: the file or its directory cannot be opened or written, or (``create=False``)
                there is no file there.
            JournalCorrupt: the file is not a Checkpoint journal.
            JournalVersionError: the file was written by a newer Checkpoint (``create=False``: or an older one).
        """
        super().__init__()
        self.path = os.path.abspath(os.path.expanduser(path))
        self.audit_key = audit_key
        self.location = self.path
        self.owners_dir = owner_lock.owners_folder(self.path)
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise JournalUnavailable(f"cannot open journal {self.path}: directory {directory} does not exist")
        if not create and not os.path.isfile(self.path):
            raise JournalUnavailable(
                f"there is no journal at {self.path} (this command opens an existing journal, it never creates one)"
            )
        if create and not os.path.exists(self.path):
            _create_owner_only(self.path)
        else:
            _warn_if_shared(self.path)
        target, uri = (self.path, False) if create else (f"file:{urllib.parse.quote(self.path)}?mode=rw", True)
        self._lowered = False  # the connection is at synchronous=NORMAL, left so by the last relaxed commit
        self._hasty = False  # the connection's busy_timeout is 0, left so by the last ``write_now``
        self._presence: _FilePresence | None = None  # this process as a replica (``register_replica``)
        self._heads: dict[str, str] = {}  # workflow -> its chain's newest hash, as this connection last wrote it
        self._next_link: int | None = None  # the id the next link takes if no other connection inserts one first
        with _translated(self.path, "open"):
            self._con = sqlite3.connect(
                target, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False, uri=uri
            )
        try:
            self._prepare(create)
        except BaseException:
            self._con.close()
            raise

    def _prepare(self, create: bool) -> None:
        found, version = _while_busy(self._identify)
        if not (found is Found.JOURNAL or (found is Found.EMPTY and create)):
            raise JournalCorrupt(f"{self.path} is not a Checkpoint journal; refusing to touch it")
        if version > SCHEMA_VERSION or (not create and version < SCHEMA_VERSION):
            raise JournalVersionError(version, SCHEMA_VERSION)
        if not create:
            with _translated(self.path, "open"):
                self._con.execute("PRAGMA synchronous=FULL")
                self._full_syncs()
            return  # a journal is made WAL when created; an existing one is used as it is
        mode = _while_busy(self._wal)
        if mode != "wal":
            raise JournalUnavailable(f"cannot put journal {self.path} in WAL mode (got {mode!r})")
        with _translated(self.path, "open"):
            self._con.execute("PRAGMA synchronous=FULL")
            self._full_syncs()
            if version < SCHEMA_VERSION:
                self._migrate()

    def _full_syncs(self) -> None:
        """Where a plain fsync stops at the drive's cache (macOS), every sync of the connection is a full one."""
        if HOST.full_fsync:
            self._con.execute("PRAGMA fullfsync = ON")
            self._con.execute("PRAGMA checkpoint_fullfsync = ON")

    def _identify(self) -> Identity:
        """What the file holds (``identity.py``), read in one transaction, so a concurrent first migration is seen
        whole or not at all."""
        with _translated(self.path, "open"):
            self._con.execute("BEGIN")
            try:
                return sqlite_identity(self._con.execute)
            finally:
                self._con.execute("COMMIT")

    def _wal(self) -> str:
        # Switching a new file to WAL takes an exclusive lock without calling the busy handler.
        with _translated(self.path, "open"):
            return str(self._con.execute("PRAGMA journal_mode=WAL").fetchone()[0])

    def _migrate(self) -> None:
        self._con.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the write lock: another process may have migrated meanwhile.
            current = self._con.execute("PRAGMA user_version").fetchone()[0]
            for target in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    self._con.execute(statement)
                if target == 4 and current > 0:
                    started = start_chains(self._con.execute, self.audit_key, current, utc_now())
                    logger.info("journal %s: %d hash chain(s) start at this migration", self.path, started)
                logger.info("journal %s migrated to schema version %d", self.path, target)
            self._con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._con.execute("COMMIT")
        except BaseException:
            self._con.execute("ROLLBACK")
            raise

    # ---- SqlJournal hooks ---------------------------------------------------------------------------------

    def _synced(self, synced: bool) -> None:
        """Set the connection's level for the next commit, ``synchronous=FULL`` or ``NORMAL``, when it differs: a
        relaxed commit leaves it NORMAL, so a run of them costs one statement, not two each; every commit that
        must be synced (``write``, ``transaction``, a statement outside a transaction) sets FULL first."""
        if synced is self._lowered:
            self._con.execute("PRAGMA synchronous=FULL" if synced else "PRAGMA synchronous=NORMAL")
            self._lowered = not synced

    def _patient(self) -> None:
        """Give the connection its busy timeout back (``write_now`` leaves it at zero)."""
        if self._hasty:
            self._con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            self._hasty = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement on the journal's connection (synced, if it commits on its own).

        Outside a transaction, a statement that finds the file locked while ``write_now`` has left the connection
        without a busy timeout is run again with it: it failed to start, so it changed nothing. (In WAL mode a
        read meets a lock only in rare moments, such as another connection recovering the WAL; a read need not
        pay two statements of every commit to be ready for them.)
        """
        con = self._con
        if con.in_transaction:
            return con.execute(sql, params)
        if self._lowered:
            self._synced(True)
        if not self._hasty:
            return con.execute(sql, params)
        try:
            return con.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
        self._patient()
        return con.execute(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT; the commit fsyncs the WAL.

        Raises:
            JournalUnavailable: the transaction could not start or commit (its writes are gone).
        """
        with _translated(self.path, "write"):
            self._synced(True)
            self._patient()
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._forget()
                self._con.execute("ROLLBACK")
                raise
            try:
                self._con.execute("COMMIT")
            except sqlite3.Error:
                self._forget()
                if self._con.in_transaction:
                    self._con.execute("ROLLBACK")
                raise

    def write(self, groups: list[Group], durable: bool = True) -> None:
        """The statements and their chain links in one BEGIN IMMEDIATE … COMMIT. ``durable=False``: this commit
        with ``synchronous=NORMAL`` (in WAL mode: written to the WAL, not synced; it survives a crash of the
        process, and the next durable commit syncs it along with its own).

        Raises:
            JournalUnavailable: nothing was written.
        """
        self._patient()
        self._write(groups, durable)

    def _write(self, groups: list[Group], durable: bool) -> None:
        """``write`` at whatever busy timeout the connection has."""
        # What ``with self.transaction(): self.write_txn(groups)`` does, without its two generator-based context
        # managers: this runs for every commit of the proxy.
        con = self._con
        try:
            if durable is self._lowered:
                self._synced(durable)
            con.execute("BEGIN IMMEDIATE")
            try:
                self.write_txn(groups)
            except BaseException:
                self._forget()
                con.execute("ROLLBACK")
                raise
            try:
                con.execute("COMMIT")
            except sqlite3.Error:
                self._forget()
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError as exc:
            raise _journal_error(self.path, "write", exc) from exc

    def execute_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """executemany on the journal's connection (synced and patient, if it commits on its own)."""
        if not self._con.in_transaction:
            if self._lowered:
                self._synced(True)
            self._patient()
        self._con.executemany(sql, rows)

    def link_txn(self, events: Sequence[Event]) -> None:
        """As ``Statements.link_txn``, from the chain heads this connection remembers from its own commits.

        Reading each chain's head was a statement of every commit (two of every journaled call); here a head is
        read once, then remembered. A remembered head is stale if another connection appended to its chain
        since (an operator's command, an event recorded by another process). That needs no statement to rule
        out: ``events.id`` is a rowid, one more than the largest, so when this commit's first link took the id
        after this connection's last one, no other connection inserted a link meanwhile. When it took another,
        the remembered heads are compared with the links stored before it; if one chain moved on, this commit's
        links are deleted and made again from the heads read now (BEGIN IMMEDIATE holds the write lock, so they
        stay the newest). A remembered head can cost a read, never fork a chain. A rolled-back transaction
        forgets every head (``_forget``).
        """
        if not events:
            return
        known = self._heads
        heads: dict[str, str] = {}
        remembered: list[str] = []
        unknown: list[str] = []
        for workflow in {event.workflow for event in events}:
            head = known.get(workflow)
            if head is None:
                unknown.append(workflow)
            else:
                heads[workflow] = head
                remembered.append(workflow)
        if unknown:
            heads.update(self.chain_heads(sorted(unknown)))
        rows = chain.append(events, self.audit_key, lambda _: heads)
        first = self._insert_links(rows)
        if remembered and first != self._next_link and self._moved(remembered, heads, first):
            logger.debug("journal %s: a chain moved on since this connection wrote it; linking again", self.path)
            self._con.execute(_UNLINK, (first,))
            fresh = self.chain_heads(sorted({event.workflow for event in events}))
            rows = chain.append(events, self.audit_key, lambda _: fresh)
            first = self._insert_links(rows)
        self._next_link = first + len(rows)
        if len(known) > HEADS_REMEMBERED:
            known.clear()
        for row in rows:  # in chain order: each workflow's newest link last
            known[row[0]] = row[6]

    def _insert_links(self, rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows of ``events`` (at least one); the id of the first (the others take the ids after it: the
        write lock is ours)."""
        first = self._con.execute(chain.INSERT_LINK, rows[0]).lastrowid
        if len(rows) > 1:
            self._con.executemany(chain.INSERT_LINK, rows[1:])
        return int(first or 0)

    def _moved(self, workflows: Sequence[str], heads: dict[str, str], before: int) -> bool:
        """Whether the newest stored link before id ``before`` of any of ``workflows`` is not its head in
        ``heads`` (another connection appended to it since this one did)."""
        for workflow in workflows:
            row = self._con.execute(_HEAD_BEFORE, (workflow, before)).fetchone()
            if (row[0] if row else "") != heads[workflow]:
                return True
        return False

    def _forget(self) -> None:
        """Forget the remembered heads: the transaction that may have written them is rolled back."""
        self._heads.clear()
        self._next_link = None

    def finish_calls(self, rows: Sequence[Sequence[Any]]) -> list[bool]:
        """As ``SqlJournal.finish_calls``, several rows by one ``executemany`` inside a savepoint: when every row
        changed (the usual case) that is the answer; else the savepoint is rolled back and the rows are finished
        one by one, to learn which changed."""
        if len(rows) == 1:
            return [self._con.execute(FINISH_CALL, rows[0]).rowcount > 0]
        # On an error the caller rolls the whole transaction back, savepoint included.
        con = self._con
        con.execute("SAVEPOINT finish_calls")
        if con.executemany(FINISH_CALL, rows).rowcount == len(rows):
            con.execute("RELEASE finish_calls")
            return [True] * len(rows)
        con.execute("ROLLBACK TO finish_calls")
        changed = super().finish_calls(rows)
        con.execute("RELEASE finish_calls")
        return changed

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Translate sqlite3 errors raised by reads."""
        with _translated(self.path, "read"):
            yield

    def errors(self, action: str) -> AbstractContextManager[None]:
        """Translate sqlite3 errors."""
        return _translated(self.path, action)

    def content_marker(self) -> tuple[Any, ...]:
        """SQLite's own change counters, instead of a scan: ``data_version`` moves when another connection
        commits, ``total_changes()`` when this one writes (an operator's resolve)."""
        data_version = self.execute("PRAGMA data_version").fetchone()[0]
        own = self.execute("SELECT total_changes()").fetchone()[0]
        return (int(data_version), int(own))

    # ---- ownership ----------------------------------------------------------------------------------------

    def _lock_path(self, root: str) -> str:
        return owner_lock.lock_path(self.path, root)

    def acquire(self, root: str, command: str = "checkpoint", *, shared: bool = False) -> Ownership:
        """Take the lock of ``root``'s lineage, exclusive (then write who we are into it) or ``shared``.

        Raises:
            WorkflowOwned: another live process holds it alone, or (not ``shared``) others share it
                (``WorkflowShared``).
            JournalUnavailable: the lock file cannot be created.
        """
        path = self._lock_path(root)
        try:
            files.make_owner_only_folder(self.owners_dir)
            fd = _open_lock(path)
        except OSError as exc:
            raise JournalUnavailable(f"cannot create the ownership lock {path}: {exc}") from exc
        deadline = time.monotonic() + LOCK_RETRY_SECONDS
        while not locks.take(fd, exclusive=not shared, wait=False):
            if time.monotonic() >= deadline:
                owner = owner_lock.read_owner(fd)
                os.close(fd)
                if not shared and owner_lock.probe(path) is None:  # held, but by sharers only
                    raise WorkflowShared(root, described(self.sharers(root))) from None
                raise WorkflowOwned(root, owner.describe() if owner else "starting up") from None
            time.sleep(0.02)
        if not shared:
            owner_lock.write_owner(fd, root, command)
        elif self._presence is not None:
            self._presence.share(root)
        return _FileOwnership(fd, path, root, command, shared)

    def register_replica(self, on_commit: Callable[[], None] | None = None) -> Presence:
        """See ``Journal.register_replica``: an exclusive lock of this process's own (``owner_lock.presence_path``);
        the stale locks of replicas that were killed are removed first. ``on_commit`` is not called: SQLite tells no
        process of another's commits.

        Raises:
            JournalUnavailable: the lock cannot be created.
        """
        owner_lock.prune_presences(self.path, STALE_PRESENCE_SECONDS)
        replica_id = uuid.uuid4().hex[:16]
        path = owner_lock.presence_path(self.path, replica_id)
        try:
            files.make_owner_only_folder(self.owners_dir)
            fd = _open_lock(path)
        except OSError as exc:
            raise JournalUnavailable(f"cannot create the presence lock {path}: {exc}") from exc
        try:
            taken = locks.take(fd, exclusive=True, wait=False)  # a name of its own: nobody else takes it
        except OSError as exc:
            os.close(fd)
            raise JournalUnavailable(f"cannot lock the presence lock {path}: {exc}") from exc
        if not taken:
            os.close(fd)
            raise JournalUnavailable(f"the presence lock {path} is held by another process")
        owner_lock.write_owner(fd, owner_lock.presence_root(replica_id), "checkpoint", [])
        self.replica_id = replica_id
        self._presence = _FilePresence(replica_id, fd, path)
        return self._presence

    def replica_alive(self, replica_id: str) -> bool:
        """True while the replica ``replica_id`` holds its presence lock (``owner_lock.probe``)."""
        if replica_id == self.replica_id:
            return True
        return owner_lock.probe(owner_lock.presence_path(self.path, replica_id)) is not None

    def _met_a_lock(self, exc: JournalUnavailable) -> bool:
        """Whether ``exc`` is SQLite's "database is locked": another connection holds the write lock."""
        return _busy(exc)

    def _take_block(self, workflow: str, size: int, *, wait: bool) -> int | None:
        """One step of ``workflow``'s shared counter by ``size`` past every sequence it holds (``sequences``): its own
        write transaction, not synced (a reservation from the block that commits later syncs it, the WAL being in
        order; a step lost in a crash of the machine is only taken again); ``wait``: at the busy timeout, else
        failing at once ("locked") where another connection holds the write lock."""
        con = self._con
        with _translated(self.path, "allocate a sequence in"):
            if wait:
                self._patient()
            elif not self._hasty:
                con.execute("PRAGMA busy_timeout = 0")
                self._hasty = True
            self._synced(False)
            con.execute("BEGIN IMMEDIATE")
            try:
                row = con.execute(TAKE_BLOCK, (workflow, size, workflow)).fetchone()
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return int(row[0]) if row else None

    def owner(self, root: str) -> OwnerInfo | None:
        """The live owner of ``root``'s lineage (``owner_lock.probe``)."""
        return owner_lock.probe(self._lock_path(root))

    def sharers(self, root: str) -> list[OwnerInfo]:
        """The live proxies whose presence names ``root``'s lineage (``owner_lock.sharers``)."""
        return owner_lock.sharers(self.path, root)

    def write_now(self, batches: Sequence[Batch]) -> bool:
        """Commit here unless another connection holds the write lock (then False, nothing written): a local
        fsync costs less than waking a committer thread, which would wait for the GIL after every statement;
        only a lock held elsewhere, whose wait has no bound but the busy timeout, goes to the thread.

        The connection keeps busy_timeout 0 after this (``_hasty``), so a run of commits here costs no statement
        to set it: whatever else runs on the connection gives it back when it needs to wait (``_patient``).
        """
        groups, durable = merged(batches)
        if not groups:
            return True
        if not self._hasty:
            self._con.execute("PRAGMA busy_timeout = 0")
            self._hasty = True
        try:
            self._write(groups, durable)
        except JournalUnavailable as exc:
            if _busy(exc):
                return False  # BEGIN IMMEDIATE (or COMMIT) found the lock taken: rolled back, nothing written
            raise
        return True

    def reopening(self) -> tuple[str, bytes | None, str | None]:
        """This file, the audit key, and this process's replica identity (if it registered one)."""
        return self.path, self.audit_key, self.replica_id

    def close(self) -> None:
        """Give back the sequences held ahead, and close the connection."""
        self.give_back()
        self._con.close()
