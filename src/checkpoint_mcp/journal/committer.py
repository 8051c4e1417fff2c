"""Commits on a thread of their own: the gateway's event loop never waits for PostgreSQL, or for a locked SQLite file.

A gateway's event loop must not stop while a commit waits: every client of the process would wait with it. A
``Committer`` owns one thread and a second connection to the journal (opened from ``Journal.reopening``). The
loop hands it the batch a unit of work gave up (``UnitOfWork.take``) and goes on; the writes of the next turns
accumulate in the unit meanwhile, and everything that queued while one commit ran is written by the next one, in
one transaction, whichever channel it came from (group commit across requests). A transaction of several batches
that fails is retried one batch at a time, so that one batch's conflict (a sequence another replica took, say)
fails only its own calls.

The stdio proxy's relay uses one too, for SQLite only (on PostgreSQL the proxy's own connection holds its
workflow's ownership, so its writes stay on it), started at the first commit that would wait.

Which commits come here is the journal's call (``Journal.write_now``): PostgreSQL's always (each is two round
trips and a flush on another server); SQLite's only when another connection holds the file's write lock. A local
commit is cheaper on the loop than here: this thread must take the GIL back after every statement, from a loop
that is busy exactly when commits matter, and on the 64-client benchmark that made each SQLite commit ~5× slower
and the gateway latency-bound (docs/benchmarks.md, "Where the time goes over HTTP").

The guarantee is the synchronous commit's: nothing that waits for a batch is released before its ``done`` runs,
on the event loop, after the transaction returned. If the process dies, a transaction under way either committed
(its PENDING rows are then in doubt: never sent, never re-run) or did not.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from checkpoint_mcp.errors import JournalError
from checkpoint_mcp.journal.base import Batch, Journal

logger = logging.getLogger(__name__)

Done = Callable[[BaseException | None], None]
STOP_SECONDS = 10.0  # at close: how long the thread may take to write what it was given


class Committer:
    """One thread writing batches to the journal through a connection of its own, in the order submitted."""

    def __init__(self, journal: Journal) -> None:
        """Nothing starts until ``start`` (on the event loop)."""
        self._journal = journal
        self._connection: Journal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: list[tuple[Batch, Done]] = []
        self._wake = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def running(self) -> bool:
        """True while batches can be submitted."""
        return self._thread is not None and not self._closing

    def start(self) -> None:
        """Open the second connection and start the thread (a replica's identity is known by now).

        Raises:
            JournalError: the journal cannot be opened again.
        """
        from checkpoint_mcp.journal import open_journal

        self._loop = asyncio.get_running_loop()
        location, audit_key, replica_id = self._journal.reopening()
        self._connection = open_journal(location, create=False, audit_key=audit_key)
        self._connection.replica_id = replica_id
        self._thread = threading.Thread(target=self._run, name="checkpoint-committer", daemon=True)
        self._thread.start()

    def submit(self, batch: Batch, done: Done) -> None:
        """Write ``batch`` as soon as the thread is free; then ``done(None)`` on the event loop, or ``done(error)``
        if nothing of it was written (or, if a connection broke during COMMIT, possibly all of it: its PENDING
        rows are then in doubt).

        Raises:
            RuntimeError: the committer is not running (nothing was queued).
        """
        with self._wake:
            if not self.running:
                raise RuntimeError("the journal's committer is not running")
            self._queue.append((batch, done))
            self._wake.notify()

    async def close(self) -> None:
        """Write what is queued, stop the thread and close its connection."""
        thread = self._thread
        if thread is None:
            return
        with self._wake:
            self._closing = True
            self._wake.notify()
        await asyncio.to_thread(thread.join, STOP_SECONDS)
        if thread.is_alive():
            logger.error("the journal's committer did not stop within %.0fs", STOP_SECONDS)
            return
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closing:
                    self._wake.wait()
                if not self._queue:
                    return
                queued, self._queue = self._queue, []
            assert self._connection is not None
            answers = _commit(self._connection, [batch for batch, _ in queued])
            assert self._loop is not None
            for (_, done), error in zip(queued, answers, strict=True):
                try:
                    self._loop.call_soon_threadsafe(done, error)
                except RuntimeError:  # the loop is closed: nobody is left to tell
                    logger.debug("a commit's result had nowhere to go")


def _commit(journal: Journal, batches: list[Batch]) -> list[BaseException | None]:
    """Write ``batches`` in one transaction; if that fails, one by one. Each batch's error, or None."""
    try:
        journal.write_batches(batches)
        return [None] * len(batches)
    except Exception as exc:
        if len(batches) == 1:
            return [_reported(exc)]
        logger.warning("a commit of %d batches failed (%s); writing them one by one", len(batches), exc)
    errors: list[BaseException | None] = []
    for batch in batches:
        try:
            journal.write_batches([batch])
            errors.append(None)
        except Exception as exc:
            errors.append(_reported(exc))
    return errors


def _reported(exc: Exception) -> BaseException:
    if not isinstance(exc, JournalError):
        logger.exception("internal error in the journal's committer", exc_info=exc)
    return exc
