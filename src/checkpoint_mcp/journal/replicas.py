"""Replicas of `checkpoint serve` on one PostgreSQL journal: liveness as a database fact, commits as notifications.

A replica is alive while its session holds its advisory lock (``replica_lock_key``), taken on a connection of its
own when it starts. The kernel of the matter is the database's: when the replica's process or host dies, or
its connection is killed, the session ends and the lock goes with it, so a PENDING call that carries a dead
replica's id is in doubt, and one that carries a live replica's id is in flight. No clock is compared.

The same connection LISTENs on ``NOTIFY_CHANNEL``: every commit that finishes calls notifies it, so a replica
whose client re-sent a call still running on another replica learns at once that the outcome is durable. If the
connection is lost, the replica reconnects (bounded delays, then again and again), takes its lock back and
listens again; until then ``alive`` is False (its calls look in doubt to the others, which is safe).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from checkpoint_mcp.clock import utc_now

try:
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "checkpoint_calls"
CONNECT_TIMEOUT_SECONDS = 5
RECONNECT_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0)  # then every 4 s, for as long as the replica runs
POLL_SECONDS = 0.5  # how often the listening thread looks up from its notifications (to stop, to check health)


def replica_lock_key(replica_id: str) -> int:
    """The advisory lock id of a replica: 64 bits of SHA-256 of a name no workflow can have."""
    digest = hashlib.sha256(f"checkpoint serve replica {replica_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _first(row: Any) -> Any:
    return row[0] if row else None


class ReplicaPresence:
    """This process as a live replica: its lock, its row in ``replicas``, and a thread listening for commits."""

    def __init__(self, url: str, location: str, scrub: Callable[[str], str], on_commit: Callable[[], None]) -> None:
        """Connect, take the lock, register, listen.

        Raises:
            psycopg.Error: the database cannot be reached (the journal translates it).
        """
        self.replica_id = uuid.uuid4().hex[:16]
        self.application_name = f"checkpoint serve {self.replica_id}"
        self._url = url
        self._location = location
        self._scrub = scrub
        self._on_commit = on_commit
        self._stopping = threading.Event()
        self.alive = False
        self.lost_reason: str | None = None
        self._conn: Any = self._connect()
        self._conn.execute(
            "INSERT INTO replicas (replica_id, pid, host, started_at) VALUES (%s, %s, %s, %s)",
            (self.replica_id, os.getpid(), socket.gethostname(), utc_now()),
        )
        self._thread = threading.Thread(target=self._listen, name="checkpoint-replica", daemon=True)
        self._thread.start()

    def _connect(self) -> Any:
        """A new session holding the replica's lock and listening (the replica is then alive)."""
        assert psycopg is not None
        conn = psycopg.connect(
            self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, application_name=self.application_name
        )
        key = replica_lock_key(self.replica_id)
        # The lock of a killed session is released as soon as its backend is gone: wait for that, bounded.
        deadline = time.monotonic() + 10
        while not _first(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()):
            if time.monotonic() > deadline:
                conn.close()
                raise psycopg.OperationalError("the replica's lock is still held by a previous session")
            time.sleep(0.05)
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self.alive = True
        self.lost_reason = None
        return conn

    def _listen(self) -> None:
        assert psycopg is not None
        while not self._stopping.is_set():
            try:
                for _ in self._conn.notifies(timeout=POLL_SECONDS):
                    self._on_commit()
                    if self._stopping.is_set():
                        break
                if self._conn.broken or self._conn.closed:
                    raise psycopg.OperationalError("the connection is closed")
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                self._reconnect(self._scrub(str(exc)))

    def _reconnect(self, reason: str) -> None:
        assert psycopg is not None
        self.alive = False
        self.lost_reason = reason
        logger.error("replica %s lost its liveness connection to %s: %s", self.replica_id, self._location, reason)
        with_delays = iter(RECONNECT_DELAYS)
        while not self._stopping.is_set():
            time.sleep(next(with_delays, RECONNECT_DELAYS[-1]))
            try:
                self._conn = self._connect()
            except psycopg.Error as exc:
                self.lost_reason = self._scrub(str(exc))
                continue
            logger.warning("replica %s is live again on %s", self.replica_id, self._location)
            self._on_commit()  # outcomes may have been committed meanwhile: let waiters look again
            return

    def close(self) -> None:
        """Stop listening, deregister, and end the session (which releases the lock)."""
        self._stopping.set()
        self._thread.join(timeout=POLL_SECONDS * 4)
        if self._conn is not None and not self._conn.closed:
            if not self._conn.broken and psycopg is not None:
                try:
                    self._conn.execute("DELETE FROM replicas WHERE replica_id = %s", (self.replica_id,))
                except psycopg.Error as exc:
                    logger.debug("could not deregister replica %s: %s", self.replica_id, self._scrub(str(exc)))
            self._conn.close()
        self.alive = False
