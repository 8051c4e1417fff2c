"""The repeat lookup (``UnitOfWork.read_signature``) on both databases: the window's exact edge, which row
decides among several, the unit's own pending rows, and a forked lineage's ranges."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import CallState, Journal


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
    unit.reserve("wf", 1, "send", "{}", "sig")
    unit.commit()
    edge = started(store, 1)
    assert unit.read_signature(lineage, "sig", edge) is not None
    assert unit.read_signature(lineage, "sig", after(edge)) is None
    assert unit.read_signature(lineage, "other", edge) is None


def test_a_completed_call_decides_before_a_pending_one_before_a_failed_one(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    for seq in (1, 2, 3, 4):
        unit.reserve("wf", seq, "send", "{}", "sig")
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
    unit.reserve("wf", 1, "send", "{}", "sig")
    found: Any = unit.read_signature(lineage, "sig", "")
    assert found.seq == 1
    assert store.unit().read_signature(lineage, "sig", "") is None  # nobody else sees it before the commit


def test_a_branch_sees_its_parents_calls_below_the_fork_only(store: Journal) -> None:
    lineage = store.lineage("wf")
    unit = store.unit()
    unit.reserve("wf", 1, "send", "{}", "early")
    unit.reserve("wf", 2, "send", "{}", "late")
    unit.commit()
    branch = unit.fork(lineage, 2)
    unit.commit()
    assert unit.read_signature(branch, "early", "") is not None
    assert unit.read_signature(branch, "late", "") is None  # the parent's #2 is not the branch's history
    assert unit.read_signature(lineage, "late", "") is not None
