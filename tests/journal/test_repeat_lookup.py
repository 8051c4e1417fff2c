"""The repeat lookup (``UnitOfWork.read_signature``) on both databases: the window's exact edge, which row
decides among several, the unit's own pending rows, a forked lineage's ranges; and the lookup with the
reservation as one serialized transaction (``Journal.reserve`` under ``NoRepeat``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.journal.conditions import NewCall, NoRepeat, Reserved, Unmet
from checkpoint_mcp.journal.records import CallState


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    location = str(request.getfixturevalue("pg_url")) if request.param == "postgres" else str(tmp_path / "j.db")
    journal = open_journal(location)
    yield journal
    journal.close()


def started(journal: Journal, seq: int) -> str:
    (record,) = [r for r in journal.calls("wf") if r.seq == seq]
    return record.started_at


def after(stamp: str) -> str:
    """One millisecond later, in the journal's format."""
    from datetime import datetime, timedelta

    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + timedelta(milliseconds=1)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_the_window_includes_its_edge_and_nothing_before_it(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig"))
    unit.commit()
    edge = started(store, 1)
    assert unit.read_signature(lineage, "sig", edge) is not None
    assert unit.read_signature(lineage, "sig", after(edge)) is None
    assert unit.read_signature(lineage, "other", edge) is None


def test_a_completed_call_decides_before_a_pending_one_before_a_failed_one(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    for seq in (1, 2, 3, 4):
        unit.reserve("wf", seq, NewCall("send", "{}", "sig"))
    unit.commit()
    unit.finish("wf", 1, CallState.FAILED, "{}")
    unit.finish("wf", 3, CallState.FAILED, "{}")
    unit.commit()
    found: Any = unit.read_signature(lineage, "sig", "")
    assert (found.seq, found.state) == (4, CallState.PENDING)  # the newest of the pending ones
    unit.finish("wf", 2, CallState.COMPLETED, '{"ok":1}')
    unit.commit()
    found = unit.read_signature(lineage, "sig", "")
    assert (found.seq, found.state) == (2, CallState.COMPLETED)  # completed once: never run again


def test_the_units_own_pending_rows_count(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "sig"))
    found: Any = unit.read_signature(lineage, "sig", "")
    assert found.seq == 1
    assert store.unit().read_signature(lineage, "sig", "") is None  # nobody else sees it before the commit


def test_a_branch_sees_its_parents_calls_below_the_fork_only(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    unit.reserve("wf", 1, NewCall("send", "{}", "early"))
    unit.reserve("wf", 2, NewCall("send", "{}", "late"))
    unit.commit()
    branch = unit.branch(lineage, 2)
    unit.fork(branch)
    unit.commit()
    assert unit.read_signature(branch, "early", "") is not None
    assert unit.read_signature(branch, "late", "") is None  # the parent's #2 is not the branch's history
    assert unit.read_signature(lineage, "late", "") is not None


def test_a_reservation_under_no_repeat_reserves_a_new_call_and_then_finds_it(store: Journal) -> None:
    lineage = store.lineage("wf")
    call = NewCall("send", "{}", "sig")
    assert store.reserve(lineage, 1, call, [NoRepeat("")]) == Reserved()
    unmet = store.reserve(lineage, 2, call, [NoRepeat("")])
    assert isinstance(unmet, Unmet)
    assert unmet.found is not None
    assert (unmet.found.seq, unmet.found.state) == (1, CallState.PENDING)
    unit = store.unit()
    unit.finish("wf", 1, CallState.FAILED, "{}")
    unit.commit()
    assert store.reserve(lineage, 2, call, [NoRepeat("")]) == Reserved()  # failed: runs again
    assert [(r.seq, r.state) for r in store.calls("wf")] == [(1, CallState.FAILED), (2, CallState.PENDING)]
    assert [link.kind for link in store.links("wf")].count("reserved") == 2


def test_a_call_whose_result_is_a_tool_error_does_not_make_a_repeat_and_one_that_succeeds_does(
    store: Journal,
) -> None:
    lineage = store.lineage("wf")
    call = NewCall("send", "{}", "sig")
    assert store.reserve(lineage, 1, call, [NoRepeat("")]) == Reserved()
    unit = store.unit()
    unit.finish("wf", 1, CallState.COMPLETED, '{"isError":true,"content":[]}', tool_error=True)
    unit.commit()
    assert unit.read_signature(lineage, "sig", "") == next(r for r in store.calls("wf") if r.seq == 1)
    assert store.reserve(lineage, 2, call, [NoRepeat("")]) == Reserved()  # the tool said it did not do it
    unit.finish("wf", 2, CallState.COMPLETED, '{"content":[]}')
    unit.commit()
    found = unit.read_signature(lineage, "sig", "")
    assert found is not None
    assert (found.seq, found.happened) == (2, True)
    unmet = store.reserve(lineage, 3, call, [NoRepeat("")])
    assert isinstance(unmet, Unmet)
    assert unmet.found == found


def race(
    barrier: threading.Barrier, outcomes: list[bool], journal: Journal, lineage: Any, seq: int, signature: str
) -> None:
    barrier.wait(timeout=10)
    outcomes.append(
        isinstance(journal.reserve(lineage, seq, NewCall("send", "{}", signature), [NoRepeat("")]), Reserved)
    )


def test_two_connections_racing_to_reserve_one_signature_reserve_it_once(
    store: Journal, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each journal has its own connection, as two replicas do: the lookup and the insert are one serialized
    transaction, so of two at the same moment exactly one reserves and the other finds its row."""
    postgres = store.location.startswith("postgres")
    other = open_journal(str(request.getfixturevalue("pg_url")) if postgres else str(tmp_path / "j.db"))
    lineage = store.lineage("wf")
    try:
        for n in range(20):
            barrier = threading.Barrier(2)
            outcomes: list[bool] = []

            threads = [
                threading.Thread(target=race, args=(barrier, outcomes, j, lineage, 2 * n + i + 1, f"sig{n}"))
                for i, j in enumerate((store, other))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
            assert sorted(outcomes) == [False, True], n
    finally:
        other.close()
    assert len(store.calls("wf")) == 20
