"""Commits of many calls at once (a busy gateway's): every row, every finish and every link as written one by one.

On PostgreSQL (``CHECKPOINT_TEST_JOURNAL=postgres``) a group of ``pgwrites.ARRAY_ROWS`` rows or more goes as one
statement per kind of row, its columns as arrays; these tests hold that path to the row-by-row one: the rows' bytes,
the finishes that found their call settled by an operator meanwhile (no change, no event), a call finished twice in
one commit, and the chain, which `checkpoint journal verify` checks link by link against the rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from checkpoint_mcp.errors import JournalUnavailable
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import Journal, ResolveAction, UnitOfWork
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.pgwrites import ARRAY_ROWS
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import FAILED_BY_OPERATOR
from ledger import verified

CALLS = 3 * ARRAY_ROWS
OPERATOR_FAILED = json.dumps({"code": FAILED_BY_OPERATOR})  # an operator's `resolve --failed`, in short
ODD = 'a "quote", a \\ backslash, {braces}, NULL, é, ☃, \t tab, and a comma,'  # what array literals must escape


def _arguments(seq: int) -> str:
    return json.dumps({"to": f"user{seq}@example.com", "note": ODD, "n": seq}, ensure_ascii=False)


def _outcome(seq: int) -> str:
    return json.dumps({"content": [{"type": "text", "text": f"sent {seq}: {ODD}"}], "isError": False})


@pytest.fixture
def opened(journal: str) -> Iterator[Journal]:
    """The journal, with workflow ``wf``; once the test is done, `checkpoint journal verify` checks its chain."""
    handle = open_journal(journal)
    try:
        handle.lineage("wf")
        yield handle
    finally:
        handle.close()
    verified(journal)


def _reserve_all(opened: Journal, keyed: bool = False) -> None:
    """Reserve calls 1 to ``CALLS`` in one commit (``keyed``: every odd one with a key, so NULLs mix in)."""
    unit = opened.unit()
    for seq in range(1, CALLS + 1):
        unit.reserve(
            "wf",
            seq,
            NewCall(
                "send_email",
                _arguments(seq),
                f"sig-{seq}",
                key=f"key-{seq}" if keyed and seq % 2 else None,
                rule=f"tools.send_email.when.r{seq}" if keyed and seq % 3 else None,  # schema 8, NULLs mixed in
            ),
        )
    unit.commit()


def _finishing_all(opened: Journal) -> UnitOfWork:
    """A unit that completes calls 1 to ``CALLS`` when committed."""
    unit = opened.unit()
    for seq in range(1, CALLS + 1):
        unit.finish("wf", seq, CallState.COMPLETED, _outcome(seq))
    return unit


def test_many_calls_in_one_commit_are_written_and_chained_as_one_by_one(opened: Journal) -> None:
    _reserve_all(opened, keyed=True)
    settled_meanwhile = {3, 7}
    for seq in settled_meanwhile:  # an operator settles two before their outcomes are committed
        opened.resolve("wf", seq, ResolveAction.FAILED, OPERATOR_FAILED, "alice", "host-a")
    _finishing_all(opened).commit()

    calls = {record.seq: record for record in opened.calls("wf")}
    assert sorted(calls) == list(range(1, CALLS + 1))
    for seq, record in calls.items():
        assert record.arguments == _arguments(seq)
        assert record.key == (f"key-{seq}" if seq % 2 else None)
        assert record.rule == (f"tools.send_email.when.r{seq}" if seq % 3 else None)
        if seq in settled_meanwhile:  # the operator's decision stands
            assert (record.state, record.outcome) == (CallState.FAILED, OPERATOR_FAILED)
        else:
            assert (record.state, record.outcome) == (CallState.COMPLETED, _outcome(seq))
    finished = [link.seq for link in opened.links("wf") if link.kind == "completed"]
    assert finished == [seq for seq in range(1, CALLS + 1) if seq not in settled_meanwhile]  # in commit order


def test_a_call_finished_twice_in_one_commit_keeps_the_first_outcome(opened: Journal) -> None:
    _reserve_all(opened)
    unit = _finishing_all(opened)
    unit.finish("wf", 2, CallState.FAILED, '{"second":true}')  # no longer PENDING: changes nothing
    unit.commit()
    record = next(record for record in opened.calls("wf") if record.seq == 2)
    assert (record.state, record.outcome) == (CallState.COMPLETED, _outcome(2))
    finished = [link.seq for link in opened.links("wf") if link.kind in ("completed", "failed")]
    assert finished == list(range(1, CALLS + 1))


def test_a_batch_that_clashes_with_a_journaled_call_writes_nothing_of_itself(opened: Journal) -> None:
    unit = opened.unit()
    unit.reserve("wf", CALLS, NewCall("send_email", _arguments(CALLS), "sig-first"))
    unit.commit()
    with pytest.raises(JournalUnavailable):
        _reserve_all(opened)  # the last one's sequence is taken
    assert [record.seq for record in opened.calls("wf")] == [CALLS]
    assert [link.seq for link in opened.links("wf") if link.kind == "reserved"] == [CALLS]
