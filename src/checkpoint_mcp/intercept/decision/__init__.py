"""The decision for one tools/call: an ordered tuple of small checks. Read this first.

::

    CHECKS = (
        ContinuationCheck(),  # a 2026-07-28 retry answering its first round's request for input goes on
        JournaledCheck(),     # the call's own place: replay, divergence (or a fork), in flight, in doubt, collected
        RepeatCheck(),        # a repeat by content, under the tool's repeat rule: replay, refuse, confirm, in doubt
        LimitCheck(),         # the tool's limit: at most so many calls per rolling window (metering.py)
        BudgetCheck(),        # the tool's budget: the amounts of its calls per rolling window (metering.py)
        ApprovalCheck(),      # the tool's approve: a person's approval of this exact call, used once
    )

Like Starlette's middleware list, each check is one small object with one job, and the order is written here
once (``tests/intercept/test_checks.py`` pins it). A check looks at the call (``call.Call``: built once, its rule
looked up once, a sub-rule chosen by its arguments where its tool has some) and what the journal and this process
know of its situation (``facts.Facts``), and returns a verdict that ends the decision, a requirement for the
journal to test inside the transaction that reserves the call, a note to keep with it, or nothing (``verdicts``).
It does no I/O of its own and writes nothing. When no check ends the decision, the interceptor reserves the call
under the requirements collected, in order (``Workflow.reserve``): in the open unit of work when there are none,
else in one durable transaction (``Journal.reserve``); the first requirement that does not hold goes back to the
check that asked for it (``unmet``), which says what the call gets.

Adding a check: write a class with ``check(call, facts) -> Step`` (and ``unmet(call, facts, unmet) -> Verdict``
if it returns a ``Require``), give its rule a policy key (``policy/grammar.py``, ``policy/rules.py``), and add one
line to ``CHECKS`` where it belongs: a check sees a call only if every check before it let it through, and its
requirement is tested after theirs.

What one process knows of a workflow's calls (where they go, which run here, which await input) is the interceptor's
``Workflow`` (``intercept/workflow.py``): it places the call before the checks run, the checks read it through the
facts (``KnownCalls``) and never change it, and the interceptor applies what the decision says after it: the
reservation, a fork (``Decision.fork``), a continued call (``Continue``).

May import: ``policy/``, ``journal/`` (its vocabulary and reports), ``errors``, ``refusals``, ``clock``,
``signature``, ``difference``, ``wire``; ``settle_rules`` of the interceptor's room. Never the interceptor, its
``workflow``, the lines it writes (``answers``), a pump or a transport.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from checkpoint_mcp.intercept.decision.approval import ApprovalCheck
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.continuation import ContinuationCheck
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.journaled import JournaledCheck
from checkpoint_mcp.intercept.decision.metering import BudgetCheck, LimitCheck
from checkpoint_mcp.intercept.decision.repeat import RepeatCheck
from checkpoint_mcp.intercept.decision.verdicts import Fork, Note, Require, Step, Verdict
from checkpoint_mcp.journal.base import Lineage
from checkpoint_mcp.journal.conditions import Condition, Unmet


class Check(Protocol):
    """One step of the decision (see the module's docstring)."""

    def check(self, call: Call, facts: Facts) -> Step:
        """A verdict, a requirement, a note, a fork, or nothing."""
        ...


@runtime_checkable
class Requiring(Check, Protocol):
    """A check that may return a ``Require``: it says what the call gets when the requirement does not hold."""

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """What the call gets when the journal found ``unmet`` as it reserved it."""
        ...


CHECKS: tuple[Check, ...] = (
    ContinuationCheck(),
    JournaledCheck(),
    RepeatCheck(),
    LimitCheck(),
    BudgetCheck(),
    ApprovalCheck(),
)
"""The checks, in order."""


class Decision(NamedTuple):
    """What the checks said of a call: a verdict; or (``verdict`` None) reserve it under ``required``, in order,
    keeping ``notes`` with it. ``fork``: the branch the call diverged to (``--on-divergence fork``), which the
    interceptor records whatever the verdict."""

    verdict: Verdict | None
    required: tuple[tuple[Requiring, Condition], ...] = ()
    notes: tuple[Note, ...] = ()
    fork: Lineage | None = None

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """What the call gets when the reservation found ``unmet``: the word of the check that required it."""
        for check, condition in self.required:
            if condition is unmet.condition:
                return check.unmet(call, facts, unmet)
        raise AssertionError(f"no check required {unmet.condition!r}")


def decide(call: Call, facts: Facts, checks: tuple[Check, ...] = CHECKS) -> Decision:
    """Run ``checks`` in order over ``call``: the first verdict ends the decision; requirements and notes are
    collected for the reservation; a fork moves the call to its new branch for the checks after it.

    Raises:
        JournalError: the journal could not be read.
    """
    required: list[tuple[Requiring, Condition]] = []
    notes: list[Note] = []
    fork: Lineage | None = None
    for check in checks:
        step = check.check(call, facts)
        if step is None:
            continue
        if isinstance(step, Require):
            if not isinstance(check, Requiring):
                raise TypeError(f"{type(check).__name__} returned a requirement but says nothing when it is unmet")
            required.append((check, step.condition))
            notes.extend(step.notes)
        elif isinstance(step, Note):
            notes.append(step)
        elif isinstance(step, Fork):
            fork = facts.fork(step.record)
        else:
            return Decision(step, fork=fork)
    return Decision(None, tuple(required), tuple(notes), fork)


__all__ = ["CHECKS", "Call", "Check", "Decision", "Facts", "Requiring", "decide"]
