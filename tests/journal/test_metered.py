"""The calls a limit or budget counts (``metered`` rows), on both databases: a reservation refused by a condition
writes nothing, whatever a condition before it had written; the rows no window counts any more are pruned as calls
are counted; a call that never ran (released, or withdrawn) counts no more."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.approval_rows import ApprovalState
from checkpoint_mcp.journal.base import Journal, ResolveAction
from checkpoint_mcp.journal.conditions import NewCall, Reserved, Unmet, UsesApproval, WithinBudget, WithinLimit
from checkpoint_mcp.journal.records import CallState

LONG_AGO = "2000-01-01T00:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    location = str(request.getfixturevalue("pg_url")) if request.param == "postgres" else str(tmp_path / "j.db")
    journal = open_journal(location)
    yield journal
    journal.close()


def call(n: int) -> NewCall:
    return NewCall("send", f'{{"n":{n}}}', f"sig{n}")


def metered(journal: Journal) -> list[tuple[str, int]]:
    rows = journal.execute("SELECT workflow_id, seq FROM metered ORDER BY seq").fetchall()
    return [(str(workflow), int(seq)) for workflow, seq in rows]


def test_a_reservation_refused_by_a_condition_uses_no_approval_before_it(store: Journal) -> None:
    """Conditions are tested in order and the first unmet one rolls the transaction back: an approval the call
    would have used stays granted for the call that can run on it."""
    lineage = store.lineage("wf")
    assert store.reserve(lineage, 1, call(1), [WithinLimit("journal", 1, LONG_AGO)]) == Reserved()
    asked = store.approvals.request_approval("wf", "send", '{"n":2}', "sig2", None, {}, 3600)
    store.approvals.decide_approval(asked.id, True, "ops")
    refused = store.reserve(lineage, 2, call(2), [UsesApproval("sig2"), WithinLimit("journal", 1, LONG_AGO)])
    assert isinstance(refused, Unmet)
    assert isinstance(refused.condition, WithinLimit)
    (approval,) = store.approvals.approvals("wf")
    assert approval.state is ApprovalState.GRANTED
    assert [r.seq for r in store.calls("wf")] == [1]


def test_rows_no_window_counts_any_more_are_pruned_as_a_call_is_counted(store: Journal) -> None:
    lineage = store.lineage("wf")
    for seq in (1, 2):
        assert store.reserve(lineage, seq, call(seq), [WithinLimit("journal", 10, LONG_AGO)]) == Reserved()
    assert metered(store) == [("wf", 1), ("wf", 2)]
    # The next call's longest window (its budget's, 24 h here; its limit's is shorter) starts after them: the
    # journal keeps milliseconds, so wait for the clock to pass the second row's.
    (newest,) = store.execute("SELECT max(at) FROM metered").fetchone()
    window = utc_now()
    while window <= newest:
        time.sleep(0.001)
        window = utc_now()
    conditions = [WithinLimit("journal", 10, window), WithinBudget("journal", 1.0, 10.0, LONG_AGO)]
    assert store.reserve(lineage, 3, call(3), conditions) == Reserved()
    assert metered(store) == [("wf", 1), ("wf", 2), ("wf", 3)]  # the budget's window still counts them
    assert store.reserve(lineage, 4, call(4), [WithinLimit("journal", 10, window)]) == Reserved()
    assert metered(store) == [("wf", 3), ("wf", 4)]


def test_a_released_or_withdrawn_call_counts_no_more(store: Journal) -> None:
    """A limit of one call: a call in doubt that an operator releases, a call reserved and never sent (withdrawn),
    and one a policy's probe proved did not happen leave the window as they found it; a completed call that is
    released still counts (it ran)."""
    lineage = store.lineage("wf")
    limit = [WithinLimit("journal", 1, LONG_AGO)]
    assert store.reserve(lineage, 1, call(1), limit) == Reserved()
    assert isinstance(store.reserve(lineage, 2, call(2), limit), Unmet)
    store.resolve("wf", 1, ResolveAction.RELEASED, None, "ops", "host")
    assert store.reserve(lineage, 2, call(2), limit) == Reserved()
    unit = store.unit()
    unit.withdraw("wf", 2, '{"code":-31000,"message":"not sent"}')
    unit.commit()
    assert [(r.seq, r.state) for r in store.calls("wf")] == [(2, CallState.FAILED)]
    assert store.reserve(lineage, 3, call(3), limit) == Reserved()
    unit = store.unit()
    unit.finish("wf", 3, CallState.COMPLETED, '{"content":[]}')
    unit.commit()
    store.resolve("wf", 3, ResolveAction.RELEASED, None, "ops", "host")
    assert isinstance(store.reserve(lineage, 4, call(4), limit), Unmet)
    assert metered(store) == [("wf", 3)]
    # A tool policy's settlement that proves an in-doubt call did not happen releases it too.
    probed = [WithinLimit("journal", 1, LONG_AGO, "probed")]
    assert store.reserve(lineage, 4, call(4), probed) == Reserved()
    assert store.take_in_doubt("wf", 4) is not None
    assert store.settle("wf", 4, ResolveAction.RELEASED, None, "probe", '{"verdict": "not happened"}')
    assert store.reserve(lineage, 4, call(4), probed) == Reserved()
