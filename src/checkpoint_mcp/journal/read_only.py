"""The two ways the resume brief opens a journal read-only, and ``open_reader``, which picks one by location.

SQLite: a read-only URI on the file (``mode=ro`` beside a live proxy's write-ahead log, ``immutable=1`` when no
proxy has the file open, so not even ``-wal``/``-shm`` files appear). PostgreSQL: a session whose transactions are
read-only. Both check that the journal is a Checkpoint journal of a schema the digest reads; what is read is
``digest.JournalReader``'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from checkpoint_mcp.errors import JournalError, JournalUnavailable
from checkpoint_mcp.journal import owner_lock
from checkpoint_mcp.journal.digest import OLDEST_SCHEMA, JournalReader
from checkpoint_mcp.journal.identity import Found, postgres_identity, sqlite_identity
from checkpoint_mcp.journal.schema import SCHEMA_VERSION

_CONNECT_TIMEOUT_SECONDS: Final = 3

# ---------------------------------------------------------------------------------------------------------
# SQLite


class _SqliteReader(JournalReader):
    def __init__(self, path: str) -> None:
        import sqlite3  # only when a journal is configured: `checkpoint brief` starts without it

        self._sqlite3 = sqlite3
        self.path = os.path.abspath(os.path.expanduser(path))
        self.location = self.path
        if not os.path.isfile(self.path):
            raise JournalUnavailable(f"journal {self.path} does not exist (no call journaled there yet?)")
        # Without a write-ahead log no proxy has the file open, and mode=ro would create -wal and -shm files.
        live = os.path.exists(self.path + "-wal") and os.path.exists(self.path + "-shm")
        uri = f"file:{_uri_path(self.path)}?{'mode=ro' if live else 'immutable=1'}"
        with self._translated():
            self._con = sqlite3.connect(uri, uri=True, timeout=1.0, check_same_thread=False)
        try:
            with self._translated():
                found, version = sqlite_identity(self._con.execute)
        except BaseException:
            self._con.close()
            raise
        if found is not Found.JOURNAL or version < OLDEST_SCHEMA:
            self._con.close()
            raise JournalUnavailable(
                f"{self.path} is not a Checkpoint journal of schema {OLDEST_SCHEMA} or later"
                " (a proxy migrates an older one)"
            )
        if version > SCHEMA_VERSION:
            self._con.close()
            raise JournalUnavailable(f"journal {self.path} has schema {version}, newer than this Checkpoint reads")
        self.schema = version

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except self._sqlite3.Error as exc:
            raise JournalUnavailable(f"cannot read journal {self.path}: {exc}") from exc

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._translated():
            return self._con.execute(sql, tuple(params)).fetchall()

    def owner_since(self, root: str) -> tuple[str, str] | None:
        owner = owner_lock.probe(owner_lock.lock_path(self.path, root))
        if owner is None:
            return None
        if owner is owner_lock.STARTING_UP:
            return owner.since, "a proxy starting up"
        return owner.since, f"pid {owner.pid} on {owner.host}"

    def replica_alive(self, replica_id: str) -> bool:
        return owner_lock.probe(owner_lock.presence_path(self.path, replica_id)) is not None

    def close(self) -> None:
        self._con.close()


def _uri_path(path: str) -> str:
    """The path as an SQLite URI path: only ``%``, ``?`` and ``#`` need escaping."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


# ---------------------------------------------------------------------------------------------------------
# PostgreSQL


class _PostgresReader(JournalReader):
    def __init__(self, url: str) -> None:

        try:
            import psycopg
        except ImportError:
            raise JournalUnavailable(
                "a PostgreSQL journal needs psycopg: pip install 'checkpoint-mcp[postgres]'"
            ) from None

        from checkpoint_mcp.journal import without_password

        self._psycopg = psycopg
        self.location = without_password(url)
        self._url = url
        with self._translated():
            self._conn = psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                application_name="checkpoint-brief",
                options="-c default_transaction_read_only=on",
            )
        try:
            with self._translated():
                found, version = postgres_identity(self._conn.execute)
        except BaseException:
            self._conn.close()
            raise
        if found in (Found.EMPTY, Found.UNMARKED):
            self._conn.close()
            raise JournalUnavailable(f"{self.location} holds no Checkpoint journal")
        if found is not Found.JOURNAL or version < OLDEST_SCHEMA:
            self._conn.close()
            raise JournalUnavailable(f"{self.location} is not a Checkpoint journal of schema {OLDEST_SCHEMA} or later")
        if version > SCHEMA_VERSION:
            self._conn.close()
            raise JournalUnavailable(f"journal {self.location} has a newer schema than this Checkpoint reads")
        self.schema = version

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            from checkpoint_mcp.journal import scrubbed

            text = scrubbed(str(exc), self._url)
            raise JournalUnavailable(f"cannot read journal {self.location}: {text.strip()}") from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._translated():
            return list(self._conn.execute(sql.replace("?", "%s"), tuple(params)).fetchall())

    def owner_since(self, root: str) -> tuple[str, str] | None:
        from checkpoint_mcp.journal.postgres import lock_key

        if not self._advisory_held(lock_key(root), "ExclusiveLock"):
            return None
        found = self.rows("SELECT since, pid, host FROM owners WHERE root_id = ?", (root,))
        if not found:
            return "", "another session"
        return str(found[0][0]), f"pid {found[0][1]} on {found[0][2]}"

    def replica_alive(self, replica_id: str) -> bool:
        from checkpoint_mcp.journal.replicas import replica_lock_key

        return self._advisory_held(replica_lock_key(replica_id))

    def _advisory_held(self, key: int, mode: str | None = None) -> bool:
        """Whether some session holds the advisory lock ``key`` (in ``mode``, if given), read from ``pg_locks``."""
        key &= 0xFFFFFFFFFFFFFFFF
        held = self.rows(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            + (" AND mode = ?" if mode else "")
            + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = ?::bigint::oid AND objid = ?::bigint::oid AND objsubid = 1",
            ((mode,) if mode else ()) + (key >> 32, key & 0xFFFFFFFF),
        )
        return bool(int(held[0][0]))

    def close(self) -> None:
        self._conn.close()


def open_reader(location: str) -> JournalReader:
    """Open the journal at ``location`` read-only: a ``postgresql://`` URL, else an SQLite file path.

    Raises:
        JournalUnavailable: it does not exist, cannot be read, or is not a Checkpoint journal this version reads.
    """
    from checkpoint_mcp.journal import is_postgres_url

    try:
        if is_postgres_url(location):
            return _PostgresReader(location)
        return _SqliteReader(location)
    except JournalUnavailable:
        raise
    except JournalError as exc:
        raise JournalUnavailable(str(exc)) from exc
