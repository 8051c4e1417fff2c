"""Replicas' sequences: blocks of the shared counter, sized by the pace of the calls, on a real PostgreSQL.

These always run on PostgreSQL (the server is started by the suite), except the sizing, which is pure.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from checkpoint_mcp.errors import JournalError, JournalUnavailable
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.postgres import PostgresJournal
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.journal.sequences import BLOCK_MAX, BLOCK_SECONDS, SequenceBlocks
from ledger import verified
from pgserver import PgServer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _counter() -> tuple[SequenceBlocks, list[int], _Clock]:
    """Blocks over an in-memory counter; the list records each step's size."""
    clock = _Clock()
    steps: list[int] = []
    top = [0]

    def take(workflow: str, size: int) -> int:
        steps.append(size)
        top[0] += size
        return top[0]

    return SequenceBlocks(take, clock), steps, clock


def test_blocks_grow_while_calls_come_fast_and_every_sequence_is_handed_out_once() -> None:
    blocks, steps, _ = _counter()
    calls = 4 * BLOCK_MAX
    seqs = [blocks.next("wf") for _ in range(calls)]
    assert seqs == list(range(1, calls + 1))  # one replica at a steady pace: no gap
    doubling = [2**i for i in range(BLOCK_MAX.bit_length())]  # 1, 2, 4, … BLOCK_MAX
    assert steps[: len(doubling) + 1] == [*doubling, BLOCK_MAX]
    held = 2 * BLOCK_MAX - 1  # what the doubling blocks hold
    assert len(steps) == len(doubling) + (calls - held + BLOCK_MAX - 1) // BLOCK_MAX


def test_a_slow_workflow_keeps_small_blocks_and_a_pause_starts_again_at_one() -> None:
    blocks, steps, clock = _counter()
    for _ in range(5):
        blocks.next("wf")
        clock.now += BLOCK_SECONDS * 3
    assert steps == [1] * 5
    for _ in range(2 * BLOCK_MAX):  # blocks of 1 to BLOCK_MAX hold 2 * BLOCK_MAX - 1: the last takes a second one
        blocks.next("wf")
    assert steps[-2:] == [BLOCK_MAX, BLOCK_MAX]
    clock.now += BLOCK_SECONDS * 1.5  # the rest of a block of BLOCK_MAX expires: half as much next time
    blocks.next("wf")
    assert steps[-1] == BLOCK_MAX // 2
    clock.now += BLOCK_SECONDS * 2
    before = blocks.next("wf")
    assert steps[-1] == 1
    assert before is not None
    assert before > 5 + (2 * BLOCK_MAX - 1) + BLOCK_MAX + BLOCK_MAX // 2  # an expired rest is a gap, never late


def test_forgotten_blocks_are_never_handed_out() -> None:
    blocks, _, _ = _counter()
    seqs = [blocks.next("wf") for _ in range(4)]  # blocks of 1, 2, 4: 4 to 7 are held
    blocks.forget()
    assert blocks.next("wf") == 8
    assert seqs == [1, 2, 3, 4]


# ---- on PostgreSQL -------------------------------------------------------------------------------------------


def _replica(url: str, name: str, workflow: str = "wf") -> PostgresJournal:
    journal = PostgresJournal(url)
    journal.replica_id = name  # as register_replica sets it (without a liveness connection)
    journal.lineage(workflow)  # the workflow's row, and its counter
    return journal


@contextmanager
def _round_trips(journal: PostgresJournal) -> Iterator[list[int]]:
    """Count the round trips ``journal`` makes inside the block (libpq's trace: one ReadyForQuery each)."""
    counted: list[int] = []
    with tempfile.TemporaryFile("w+") as trace:
        pgconn = journal._conn.pgconn
        pgconn.trace(trace.fileno())
        try:
            yield counted
        finally:
            pgconn.untrace()
        os.fsync(trace.fileno())
        trace.seek(0)
        counted.append(sum("ReadyForQuery" in line for line in trace))


def test_a_block_is_taken_in_one_round_trip_and_calls_in_a_row_share_few(pg_url: str) -> None:
    journal = _replica(pg_url, "a")
    try:
        with _round_trips(journal) as first:
            assert journal.allocate_seq("wf") == 1
        with _round_trips(journal) as rest:
            seqs = [journal.allocate_seq("wf") for _ in range(199)]
    finally:
        journal.close()
    assert first == [1]
    assert seqs == list(range(2, 201))
    assert rest[0] <= 10  # blocks of 2, 4, 8, ...: not one step per call


def test_two_replicas_allocating_at_once_never_hand_out_the_same_sequence(pg_url: str) -> None:
    replicas = [_replica(pg_url, name) for name in ("a", "b")]
    got: dict[str, list[int]] = {}

    def allocate(journal: PostgresJournal) -> None:
        seqs = []
        for _ in range(400):
            seq = journal.allocate_seq("wf")
            assert seq is not None
            seqs.append(seq)
        got[str(journal.replica_id)] = seqs

    try:
        threads = [threading.Thread(target=allocate, args=(journal,)) for journal in replicas]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for journal in replicas:
            journal.close()
    assert len(got["a"]) == len(got["b"]) == 400
    assert not set(got["a"]) & set(got["b"])
    for seqs in got.values():
        assert seqs == sorted(seqs)  # each replica's own sequences rise


def test_a_replica_that_dies_leaves_a_gap_and_nothing_else_breaks(pg_url: str, tmp_path: Path) -> None:
    dead = _replica(pg_url, "dead")
    held = [dead.allocate_seq("wf") for _ in range(10)]  # blocks of 1, 2, 4, 8: 11 to 15 are still held
    dead.close()
    live = _replica(pg_url, "live")
    try:
        seq = live.allocate_seq("wf")
        assert seq == 16
        unit = live.unit()
        unit.reserve("wf", seq, NewCall("send_email", "{}", "sig"))
        unit.commit()
    finally:
        live.close()
    assert held == list(range(1, 11))
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT seq FROM calls WHERE workflow_id = 'wf'").fetchall() == [(16,)]
    verified(pg_url)


def test_a_replica_that_lost_its_connection_forgets_its_blocks(pg_server: PgServer, pg_url: str) -> None:
    a, b = _replica(pg_url, "a"), _replica(pg_url, "b")
    try:
        assert [a.allocate_seq("wf") for _ in range(4)] == [1, 2, 3, 4]  # 5 to 7 held by a
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (a._conn.info.backend_pid,))
        a.lineage("wf")  # the next use of the journal reconnects
        assert b.allocate_seq("wf") == 8
        assert a.allocate_seq("wf") == 9  # not 5: a step the database lost could have been taken again
    finally:
        a.close()
        b.close()


def test_a_reservation_and_its_finish_commit_in_two_round_trips_each(pg_url: str) -> None:
    journal = _replica(pg_url, "a")
    try:
        seq = journal.allocate_seq("wf")
        assert seq is not None
        unit = journal.unit()
        unit.reserve("wf", seq, NewCall("send_email", "{}", "sig"))
        with _round_trips(journal) as reserved:
            unit.commit()
        unit.finish("wf", seq, CallState.COMPLETED, '{"content": []}')
        with _round_trips(journal) as finished:
            unit.commit()
    finally:
        journal.close()
    # BEGIN, the statements, the chain's lock and head; then the links, NOTIFY and COMMIT.
    assert reserved == finished == [2]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT state FROM calls WHERE workflow_id = 'wf'").fetchall() == [("COMPLETED",)]
        kinds = conn.execute("SELECT kind FROM events WHERE workflow_id = 'wf' ORDER BY id").fetchall()
    assert [k for (k,) in kinds][-2:] == ["reserved", "completed"]


def test_a_write_that_fails_in_its_pipeline_is_rolled_back_and_the_next_one_works(pg_url: str) -> None:
    journal = _replica(pg_url, "a")
    try:
        unit = journal.unit()
        unit.reserve("wf", 1, NewCall("send_email", "{}", "sig"))
        unit.commit()
        unit.reserve("wf", 2, NewCall("send_email", "{}", "sig"))
        unit.reserve("wf", 1, NewCall("send_email", "{}", "other"))  # taken: the whole transaction fails
        with pytest.raises(JournalUnavailable):
            unit.commit()
        unit.reserve("wf", 3, NewCall("send_email", "{}", "sig"))
        unit.commit()
    finally:
        journal.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT seq FROM calls WHERE workflow_id = 'wf' ORDER BY seq").fetchall() == [(1,), (3,)]
    verified(pg_url)


def test_a_write_that_finds_its_connection_dead_is_sent_again_on_a_new_one(pg_server: PgServer, pg_url: str) -> None:
    journal = _replica(pg_url, "a")
    try:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (journal._conn.info.backend_pid,))
        unit = journal.unit()
        unit.reserve("wf", 1, NewCall("send_email", "{}", "sig"))
        unit.commit()
    finally:
        journal.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT seq, state FROM calls WHERE workflow_id = 'wf'").fetchall() == [(1, "PENDING")]


def test_a_write_that_fails_after_its_commit_was_queued_writes_nothing_and_the_next_one_works(pg_url: str) -> None:
    """The second pipeline queues the links, NOTIFY and COMMIT together: a link refused there (here by a trigger)
    skips the COMMIT, and the transaction is rolled back on the same live connection."""
    journal = _replica(pg_url, "a")
    refuse = (
        "CREATE FUNCTION refuse_seq_2() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN IF NEW.seq = 2 THEN RAISE EXCEPTION 'link refused by the test'; END IF; RETURN NEW; END $$"
    )
    try:
        unit = journal.unit()
        unit.reserve("wf", 1, NewCall("send_email", "{}", "sig1"))
        unit.commit()
        session = journal._conn.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(refuse)
            admin.execute("CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_seq_2()")
        unit.reserve("wf", 2, NewCall("send_email", "{}", "sig2"))
        with pytest.raises(JournalError, match="link refused by the test"):
            unit.commit()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("DROP TRIGGER refuse ON events")
        unit.reserve("wf", 3, NewCall("send_email", "{}", "sig3"))
        unit.commit()
        assert journal._conn.info.backend_pid == session  # the same session carried on: nothing to reconnect
    finally:
        journal.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT seq FROM calls WHERE workflow_id = 'wf' ORDER BY seq").fetchall() == [(1,), (3,)]
        assert conn.execute("SELECT count(*) FROM events WHERE seq = 2").fetchone() == (0,)
    verified(pg_url)
