"""Read-only digests for the resume brief, on a real journal (SQLite, or PostgreSQL under the suite's flip):
the position saved with a checkpoint, what is in doubt, in flight, and done since, by sequence or by time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.errors import JournalUnavailable
from checkpoint_mcp.journal import open_journal, operations
from checkpoint_mcp.journal.base import Journal, Lineage
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.digest import DONE_FETCH, JournalReader, Mark
from checkpoint_mcp.journal.read_only import open_reader
from checkpoint_mcp.journal.records import CallState


@contextmanager
def _writer(location: str, workflow: str) -> Iterator[tuple[Journal, Lineage]]:
    journal = open_journal(location)
    try:
        yield journal, journal.lineage(workflow)
    finally:
        journal.close()


def _calls(location: str, workflow: str, *states: str, tool: str = "send_email", at: int | None = None) -> None:
    """Journal one call per state, as a proxy would (PENDING first), from the next sequence or ``at``."""
    with _writer(location, workflow) as (journal, lineage):
        ownership = journal.acquire(lineage.root)
        seq = journal.max_seq(lineage) if at is None else at - 1
        unit = journal.unit()
        for state in states:
            seq += 1
            unit.reserve(lineage.head, seq, NewCall(tool, json.dumps({"n": seq}), f"{seq:064x}"))
            if state != "PENDING":
                unit.finish(lineage.head, seq, CallState(state), "{}")
        unit.commit()
        ownership.release()


@contextmanager
def _reader(location: str) -> Iterator[JournalReader]:
    reader = open_reader(location)
    try:
        yield reader
    finally:
        reader.close()


def _mark(location: str, workflow: str) -> Mark:
    with _reader(location) as reader:
        mark = reader.mark(workflow)
    assert mark is not None
    return mark


def _after_now() -> str:
    """The journal's clock now, and then until it has moved on, so later rows are strictly after."""
    now = utc_now()
    while utc_now() <= now:
        pass
    return now


def test_the_saved_position_is_the_last_sequence_its_time_and_the_counts(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED", "FAILED", "PENDING")

    mark = _mark(journal, workflow)

    assert (mark.head, mark.last_seq, mark.calls, mark.completed, mark.failed) == (workflow, 3, 3, 1, 1)
    assert mark.pending == (3,)
    assert mark.last_at is not None
    assert mark.last_at.endswith("Z")


def test_since_the_mark_only_later_sequences_and_the_saved_in_flight_calls_count(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED", "COMPLETED", "PENDING")
    mark = _mark(journal, workflow)
    with _writer(journal, workflow) as (writer, lineage):
        unit = writer.unit()
        unit.finish(lineage.head, 3, CallState.COMPLETED, "{}")  # the call in flight at the save came back
        unit.commit()
    _calls(journal, workflow, "COMPLETED", "FAILED", "PENDING", tool="charge_card")

    with _reader(journal) as reader:
        digest = reader.digest(workflow, mark, "2000-01-01T00:00:00.000Z")

    assert digest.exact
    assert [c.seq for c in digest.in_doubt] == [6]
    assert [(c.seq, c.state) for c in digest.done] == [
        (3, CallState.COMPLETED),
        (4, CallState.COMPLETED),
        (5, CallState.FAILED),
    ]
    assert digest.done_total == 3
    assert digest.done_by_tool == {"send_email": 1, "charge_card": 2}
    assert digest.before == {"completed": 2, "failed": 0}
    assert digest.in_doubt[0].arguments == '{"n": 6}'


def test_without_a_mark_the_journal_s_clock_tells_what_came_after_the_save(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED", "PENDING")
    saved_at = _after_now()
    _calls(journal, workflow, "COMPLETED", "COMPLETED")

    with _reader(journal) as reader:
        digest = reader.digest(workflow, None, saved_at)

    assert not digest.exact
    assert [c.seq for c in digest.in_doubt] == [2]
    assert [c.seq for c in digest.done] == [3, 4]
    assert digest.before == {"completed": 1, "failed": 0}


def test_a_released_call_taken_again_below_the_mark_is_found_by_time(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED", "COMPLETED", "COMPLETED")
    mark = _mark(journal, workflow)
    saved_at = _after_now()
    with _writer(journal, workflow) as (writer, _):
        operations.resolve(writer, workflow, 2, release=True)
    _calls(journal, workflow, "PENDING", at=2)  # an explicit `checkpoint_seq: 2` after the release

    with _reader(journal) as reader:
        digest = reader.digest(workflow, mark, saved_at)

    assert not digest.exact
    assert [c.seq for c in digest.in_doubt] == [2]


def test_a_call_journaled_in_a_gap_below_the_mark_is_noticed(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED")
    _calls(journal, workflow, "COMPLETED", at=5)  # sequences 2 to 4 are free
    mark = _mark(journal, workflow)
    saved_at = _after_now()
    _calls(journal, workflow, "PENDING", at=3)

    with _reader(journal) as reader:
        digest = reader.digest(workflow, mark, saved_at)

    assert not digest.exact
    assert [c.seq for c in digest.in_doubt] == [3]


def test_a_pending_call_sent_by_the_live_owner_is_in_flight_not_in_doubt(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "PENDING")  # left by a proxy that died
    mark = _mark(journal, workflow)
    with _writer(journal, workflow) as (writer, lineage):
        ownership = writer.acquire(lineage.root)  # a new live proxy
        _after_now()
        unit = writer.unit()
        unit.reserve(lineage.head, 2, NewCall("send_email", "{}", "0" * 64))
        unit.commit()
        with _reader(journal) as reader:
            digest = reader.digest(workflow, mark, "2000-01-01T00:00:00.000Z")
        ownership.release()

    assert [c.seq for c in digest.in_doubt] == [1]
    assert [c.seq for c in digest.in_flight] == [2]
    assert digest.owner is not None
    assert "pid" in digest.owner


def test_thousands_of_calls_since_the_save_are_counted_and_only_the_newest_read(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED")
    mark = _mark(journal, workflow)
    _calls(journal, workflow, *["COMPLETED"] * 2000)
    _calls(journal, workflow, *["COMPLETED"] * 1000, tool="charge_card")

    with _reader(journal) as reader:
        digest = reader.digest(workflow, mark, "2000-01-01T00:00:00.000Z")

    assert digest.done_total == 3000
    assert digest.done_by_tool == {"send_email": 2000, "charge_card": 1000}
    assert len(digest.done) == DONE_FETCH
    assert digest.done[-1].seq == 3001


def test_a_forked_workflow_is_read_on_its_newest_branch(journal: str, workflow: str) -> None:
    _calls(journal, workflow, "COMPLETED", "COMPLETED")
    mark = _mark(journal, workflow)
    saved_at = _after_now()
    with _writer(journal, workflow) as (writer, lineage):
        unit = writer.unit()
        branch = unit.branch(lineage, 2)
        unit.fork(branch)
        unit.reserve(branch.head, 2, NewCall("charge_card", "{}", "1" * 64))
        unit.commit()

    with _reader(journal) as reader:
        digest = reader.digest(workflow, mark, saved_at)

    assert digest.head == f"{workflow}~1"
    assert [(c.workflow, c.seq) for c in digest.in_doubt] == [(f"{workflow}~1", 2)]


def test_an_unknown_workflow_has_nothing_to_say(journal: str) -> None:
    _calls(journal, "someone-else", "PENDING")

    with _reader(journal) as reader:
        mark = reader.mark("mine")
        digest = reader.digest("mine", mark, "2000-01-01T00:00:00.000Z")

    assert mark == Mark("mine", 0, None, 0, 0, 0, (), 0)
    assert (digest.in_doubt, digest.done, digest.done_total) == ((), (), 0)


def test_a_location_that_holds_no_journal_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    with pytest.raises(JournalUnavailable, match="does not exist"):
        open_reader(str(tmp_path / "nothing.db"))
    assert list(tmp_path.iterdir()) == []
