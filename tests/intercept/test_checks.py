"""The decision for a tools/call is an ordered tuple of checks, written once: its order is pinned here, and so is
what ``decide`` does with what each check returns (the first verdict ends it, requirements and notes are
collected in order, an unmet requirement goes back to the check that asked for it)."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_mcp.intercept.decision import CHECKS, Decision, decide
from checkpoint_mcp.intercept.decision.verdicts import Note, Refuse, Require, Step, Verdict
from checkpoint_mcp.journal.conditions import NoRepeat, Unmet, WithinLimit
from checkpoint_mcp.refusals import InvalidCallParams


def test_the_checks_run_in_this_order() -> None:
    """Each check sees a call only if every check before it let it through, and its requirement is tested after
    theirs: a call answered from the journal takes nothing from a limit, a call over its limit asks for no
    approval (tests/intercept/test_limits.py drives both through real proxies)."""
    assert [type(check).__name__ for check in CHECKS] == [
        "ContinuationCheck",
        "JournaledCheck",
        "RepeatCheck",
        "LimitCheck",
        "BudgetCheck",
        "ApprovalCheck",
    ]


class Says:
    """A check that always returns ``step`` and records that it ran."""

    def __init__(self, step: Step, ran: list[str], name: str) -> None:
        self.step, self.ran, self.name = step, ran, name

    def check(self, call: Any, facts: Any) -> Step:
        self.ran.append(self.name)
        return self.step

    def unmet(self, call: Any, facts: Any, unmet: Unmet) -> Verdict:
        return Refuse(InvalidCallParams(f"{self.name} unmet"))


def test_the_first_verdict_ends_the_decision_and_drops_what_came_before() -> None:
    ran: list[str] = []
    refusal = Refuse(InvalidCallParams("no"))
    checks = (
        Says(Note("wf", "repeat", 1, {}), ran, "note"),
        Says(Require(NoRepeat("")), ran, "require"),
        Says(refusal, ran, "verdict"),
        Says(None, ran, "after"),
    )
    assert decide(Any, Any, checks) == Decision(refusal)  # type: ignore[arg-type]
    assert ran == ["note", "require", "verdict"]


def test_requirements_and_notes_are_collected_in_order_and_an_unmet_one_goes_back_to_its_check() -> None:
    ran: list[str] = []
    first, second = NoRepeat(""), WithinLimit("journal", 1, "")
    note = Note("wf", "repeat", 1, {"action": "ran_again"})
    checks = (
        Says(Require(first, (note,)), ran, "repeat"),
        Says(None, ran, "nothing"),
        Says(Require(second), ran, "limit"),
    )
    decision = decide(Any, Any, checks)  # type: ignore[arg-type]
    assert decision.verdict is None
    assert [condition for _, condition in decision.required] == [first, second]
    assert decision.notes == (note,)
    verdict = decision.unmet(Any, Any, Unmet(second))  # type: ignore[arg-type]
    assert isinstance(verdict, Refuse)
    assert verdict.refusal.message == "limit unmet"


def test_a_check_that_requires_a_condition_must_say_what_its_failure_answers() -> None:
    class Mute:
        def check(self, call: Any, facts: Any) -> Step:
            return Require(NoRepeat(""))

    with pytest.raises(TypeError, match="Mute returned a requirement"):
        decide(Any, Any, (Mute(),))  # type: ignore[arg-type]


def test_a_budgets_amount_is_a_number_0_or_more_that_fits_a_float() -> None:
    """What a budget counts: anything else (a string, a boolean, nothing, a negative number, one too large for a
    64-bit float, NaN or infinity) is no amount, and the call is refused before it is counted."""
    from checkpoint_mcp.intercept.decision.metering import amount
    from checkpoint_mcp.intercept.policy import Budget

    budget = Budget("/amount/value", ("amount", "value"), 100.0, 3600.0)
    for number, counted in ((12, 12.0), (0, 0.0), (-0.0, 0.0), (2.5, 2.5), (10**300, 1e300)):
        assert amount(budget, {"amount": {"value": number}}) == counted
    for bad in ("12", True, None, -1, -1e9, 10**400, float("nan"), float("inf")):
        assert amount(budget, {"amount": {"value": bad}}) is None, bad
    assert amount(budget, {"amount": {}}) is None
    assert amount(budget, {}) is None
