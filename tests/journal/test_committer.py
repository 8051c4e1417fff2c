"""The committer thread: batches taken from units, written on a twin connection, merged while the thread is busy.

Runs on SQLite, and on PostgreSQL under ``CHECKPOINT_TEST_JOURNAL=postgres`` (the ``journal`` fixture).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Sequence

import pytest

from checkpoint_mcp.errors import JournalUnavailable
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import Batch, Journal
from checkpoint_mcp.journal.committer import Committer
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState

from support import DEFAULT_TIMEOUT

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def opened(journal: str) -> Journal:
    return open_journal(journal)


async def _committed(committer: Committer, batches: list[Batch | None]) -> list[BaseException | None]:
    """Submit each batch, then wait until the committer has answered them all (on this loop)."""
    loop = asyncio.get_running_loop()
    answers = [loop.create_future() for _ in batches]
    for batch, answer in zip(batches, answers, strict=True):
        assert batch is not None
        committer.submit(batch, answer.set_result)
    async with asyncio.timeout(DEFAULT_TIMEOUT):
        return list(await asyncio.gather(*answers))


def test_a_taken_batch_stays_visible_to_reads_until_settled_and_new_writes_wait_for_the_next(opened: Journal) -> None:
    lineage = opened.lineage("wf")
    unit = opened.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig1", key="k1"))
    batch = unit.take()
    assert batch is not None
    assert unit.empty  # the next turn's writes start a new batch
    unit.reserve("wf", 2, NewCall("send", "{}", "sig2"))
    # Neither is in the journal yet, yet the unit shows both (the first one's commit may be running elsewhere).
    assert opened.calls("wf") == []
    assert unit.read(lineage, 1) is not None
    assert unit.read_key(lineage, "k1") is not None
    assert unit.read(lineage, 2) is not None
    second = unit.take()
    assert second is not None
    assert [row[1] for row in second.groups[0][1]] == [2]  # only the new write
    location, audit_key, _ = opened.reopening()
    other = open_journal(location, create=False, audit_key=audit_key)
    try:
        other.write_batches([batch])
        unit.settled(batch)
        # Now the row is read from the journal (through the first connection), not from the overlay.
        assert [r.seq for r in opened.calls("wf")] == [1]
        assert unit.read(lineage, 1) is not None
        unit.settled(second)  # never written: gone from the overlay, and from everywhere
        assert unit.read(lineage, 2) is None
    finally:
        other.close()
        opened.close()


async def test_the_committer_merges_what_queued_while_it_was_busy_and_answers_on_the_loop(opened: Journal) -> None:
    committer = Committer(opened)
    committer.start()
    writes: list[int] = []
    gate = threading.Event()
    real = opened.__class__.write_batches

    def slow_first(self: Journal, batches: Sequence[Batch]) -> None:
        writes.append(len(batches))
        if len(writes) == 1:
            assert gate.wait(DEFAULT_TIMEOUT)  # hold the thread in its first commit while the rest queue up
        real(self, batches)

    units = [opened.unit() for _ in range(4)]
    for seq, unit in enumerate(units, 1):
        unit.reserve("wf", seq, NewCall("send", "{}", f"sig{seq}"))
    batches = [unit.take() for unit in units]
    loop = asyncio.get_running_loop()
    on_loop: list[bool] = []
    try:
        opened.__class__.write_batches = slow_first  # type: ignore[method-assign]
        first = loop.create_future()

        def answered(error: BaseException | None) -> None:
            on_loop.append(threading.current_thread() is threading.main_thread())
            first.set_result(error)

        assert batches[0] is not None
        committer.submit(batches[0], answered)
        await asyncio.sleep(0.2)  # the thread is inside the first commit now
        rest = asyncio.ensure_future(_committed(committer, batches[1:]))
        await asyncio.sleep(0.2)
        gate.set()
        assert await first is None
        assert await rest == [None, None, None]
    finally:
        opened.__class__.write_batches = real  # type: ignore[method-assign]
        await committer.close()
    assert writes == [1, 3]  # the three that queued went in one transaction
    assert on_loop == [True]  # ``done`` runs on the event loop, not on the committer's thread
    assert {r.seq: r.state for r in opened.calls("wf")} == dict.fromkeys((1, 2, 3, 4), CallState.PENDING)
    opened.close()


async def test_one_failing_batch_of_a_merged_commit_fails_alone(opened: Journal) -> None:
    seed = opened.unit()
    seed.reserve("wf", 2, NewCall("send", "{}", "taken"))
    seed.commit()  # sequence 2 is journaled already: a batch reserving it again conflicts
    committer = Committer(opened)
    committer.start()
    gate = threading.Event()
    real = opened.__class__.write_batches
    writes: list[int] = []

    def held(self: Journal, batches: Sequence[Batch]) -> None:
        writes.append(len(batches))
        if len(writes) == 1:
            assert gate.wait(DEFAULT_TIMEOUT)
        real(self, batches)

    blocker = opened.unit()
    blocker.reserve("wf", 1, NewCall("send", "{}", "sig1"))
    batches = []
    for seq in (3, 2, 4):
        unit = opened.unit()
        unit.reserve("wf", seq, NewCall("send", "{}", f"sig{seq}"))
        batches.append(unit.take())
    try:
        opened.__class__.write_batches = held  # type: ignore[method-assign]
        first = asyncio.ensure_future(_committed(committer, [blocker.take()]))
        await asyncio.sleep(0.2)  # the thread holds the first commit; the three queue behind it
        rest = asyncio.ensure_future(_committed(committer, batches))
        await asyncio.sleep(0.2)
        gate.set()
        assert await first == [None]
        errors = await rest
    finally:
        opened.__class__.write_batches = real  # type: ignore[method-assign]
        await committer.close()
    assert writes == [1, 3, 1, 1, 1]  # together, then (the transaction failed) one by one
    assert errors[0] is None
    assert errors[2] is None
    assert isinstance(errors[1], JournalUnavailable)
    assert {r.seq: r.signature for r in opened.calls("wf")} == {1: "sig1", 2: "taken", 3: "sig3", 4: "sig4"}
    opened.close()


async def test_a_closed_committer_writes_what_was_queued_and_refuses_more(opened: Journal) -> None:
    committer = Committer(opened)
    committer.start()
    unit = opened.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig1"))
    pending = asyncio.ensure_future(_committed(committer, [unit.take()]))
    await asyncio.sleep(0)
    await committer.close()
    assert await pending == [None]
    unit.reserve("wf", 2, NewCall("send", "{}", "sig2"))
    batch = unit.take()
    assert batch is not None
    with pytest.raises(RuntimeError, match="not running"):
        committer.submit(batch, lambda error: None)
    assert [r.seq for r in opened.calls("wf")] == [1]
    opened.close()


def test_write_now_commits_here_on_sqlite_unless_the_lock_is_held_and_never_on_postgresql(
    opened: Journal, journal: str
) -> None:
    unit = opened.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig1"))
    batch = unit.take()
    assert batch is not None
    if journal.startswith("postgresql://"):
        assert opened.write_now([batch]) is False  # every commit of a networked journal goes to the committer
        assert opened.calls("wf") == []
        opened.close()
        return
    blocker = sqlite3.connect(journal, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    assert opened.write_now([batch]) is False  # the lock is held elsewhere: nothing written, and no wait
    assert time.monotonic() - started < 1.0
    blocker.execute("ROLLBACK")
    blocker.close()
    assert opened.calls("wf") == []
    assert opened.write_now([batch]) is True
    assert [r.seq for r in opened.calls("wf")] == [1]
    opened.close()
