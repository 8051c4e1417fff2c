"""A client session's memory of its answered calls keeps each only as long as a repeat of it can be found (the
longest window of the policy): a session of a million calls holds what its windows can still match, not a million
entries (issue 44, point 9)."""

from __future__ import annotations

from checkpoint_mcp.intercept.decision.memory import SessionMemory
from checkpoint_mcp.intercept.decision.verdicts import Claimed
from checkpoint_mcp.journal.records import CallRecord, CallState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(seq: int) -> CallRecord:
    return CallRecord("wf", seq, "send_email", "{}", "s", CallState.COMPLETED, None, "2026-01-01T00:00:00.000Z", None)


def answer(memory: SessionMemory, seq: int) -> None:
    memory.answered(("n", seq), Claimed("wf", seq, "send_email", "s"))


def test_answers_older_than_the_longest_window_are_let_go_as_new_ones_come() -> None:
    clock = Clock()
    memory = SessionMemory("1:2", horizon=60.0, clock=clock)
    for seq in (1, 2, 3):
        answer(memory, seq)
    clock.now += 30
    answer(memory, 4)
    assert len(memory) == 4
    assert all(memory.remembers(record(seq)) for seq in (1, 2, 3, 4))
    clock.now += 31  # the first three are now older than any window the policy looks in
    assert not memory.remembers(record(1))
    answer(memory, 5)
    assert len(memory) == 2
    assert [seq for seq in range(1, 6) if memory.remembers(record(seq))] == [4, 5]


def test_a_session_of_many_calls_holds_only_those_its_windows_can_still_match() -> None:
    clock = Clock()
    memory = SessionMemory(None, horizon=10.0, clock=clock)
    for seq in range(1, 100_001):
        answer(memory, seq)
        clock.now += 0.001  # a thousand calls a second
    assert len(memory) <= 10_001
    assert memory.remembers(record(100_000))
    assert not memory.remembers(record(1))


def test_a_cancellation_after_the_answer_forgets_the_call() -> None:
    memory = SessionMemory(None, horizon=60.0, clock=Clock())
    answer(memory, 7)
    memory.cancelled(("n", 7))
    assert not memory.remembers(record(7))
    assert len(memory) == 0
