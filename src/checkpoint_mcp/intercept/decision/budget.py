"""The check of a tool policy's ``budget``: the amounts of the tool's calls per rolling window add up to at most
so much.

``budget = { sum = "/amount", max = 100, per = "24h" }`` adds the numbers at ``/amount`` in the arguments of the
tool's calls that ran or are running in the window (in the workflow, or with ``scope = "journal"`` in every
workflow of the journal), this call's included: over ``max``, it does not run. A call whose arguments hold no
number there is refused (nothing runs that the budget cannot count). The sum and the reservation are one
transaction (``WithinBudget``), so replicas racing on one journal together stay within it.
"""

from __future__ import annotations

from checkpoint_mcp.clock import duration_text, iso_after, iso_before
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.limit import refused, scope_key
from checkpoint_mcp.intercept.decision.verdicts import Require, Step, Verdict
from checkpoint_mcp.intercept.policy.pointer import MISSING, resolve
from checkpoint_mcp.journal.conditions import Unmet, WithinBudget
from checkpoint_mcp.refusals import LimitReached
from checkpoint_mcp.wire import dumps


class BudgetCheck:
    """``budget``: a requirement that the window's amounts, with this call's, stay within the budget."""

    def check(self, call: Call, facts: Facts) -> Step:
        """``WithinBudget`` for a tool under a budget (refused when the call's amount cannot be read)."""
        budget = call.rule.budget
        if budget is None:
            return None
        amount = budget.amount(call.arguments)
        if amount is None:
            found = resolve(call.arguments, budget.tokens)
            got = "nothing" if found is MISSING else dumps(found)[:80]
            refusal = LimitReached.unreadable(
                workflow=facts.place.lineage.head,
                tool=call.name,
                rule=call.rule.source,
                scope=budget.scope.value,
                pointer=budget.pointer,
                got=got,
            )
            return refused(facts, refusal)
        since = iso_before(budget.per_seconds)
        return Require(WithinBudget(scope_key(budget.scope, facts, budget.part), amount, budget.most, since))

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """Over the budget: refused, saying when enough of the window's oldest calls leave it for this one."""
        budget = call.rule.budget
        condition = unmet.condition
        assert budget is not None
        assert isinstance(condition, WithinBudget)
        spent = sum(one.amount for one in unmet.counted)
        after: str | None = None
        if condition.amount <= budget.most:
            left = spent
            for one in unmet.counted:  # oldest first: once this one leaves the window, is there room?
                left -= one.amount
                if left + condition.amount <= budget.most:
                    after = iso_after(one.at, budget.per_seconds)
                    break
        return refused(
            facts,
            LimitReached.over_budget(
                workflow=facts.place.lineage.head,
                tool=call.name,
                rule=call.rule.source,
                scope=budget.scope.value,
                pointer=budget.pointer,
                most=budget.most,
                per=duration_text(budget.per_seconds),
                spent=spent,
                amount=condition.amount,
                after=after,
            ),
        )
