"""The checks of a tool policy's ``limit`` and ``budget``: what the calls of a tool that ran in a rolling window
may add up to, counted one by one (a limit) or by an amount in their arguments (a budget).

``limit = { calls = 3, per = "1h" }`` lets at most so many calls of the tool run per window; ``budget = { sum =
"/amount", max = 100, per = "24h" }`` adds the numbers at ``/amount`` in the arguments of the tool's calls, this
call's included, and lets it run only within ``max``. What counts is every call of the tool that ran or is running
(a call in flight counts, so two concurrent calls cannot both pass a limit of one; a refused or replayed call does
not), in the workflow, or, with ``scope = "journal"``, in every workflow of the journal (a cap for a fleet), or
with ``scope = "principal"`` in every workflow of the call's principal (`checkpoint serve` with tokens from an
identity provider), so that one person's runaway agent cannot spend everyone's allowance. Behind `checkpoint serve
--upstreams`, a tool is counted by the name the client sees (``mail__send``): two upstreams' tools of one name
never count against each other.

A budget's amount must be a number, 0 or more, that fits a 64-bit float: anything else (missing, a string, a
negative number, a 400-digit integer) is refused before the upstream and counted nowhere. The count or sum and the
reservation are one transaction (``WithinLimit``, ``WithinBudget``), so replicas racing on one journal together
stay within the rule. Both refusals are ``LimitReached`` (``refusals.LIMIT_REACHED``), written once here (``refused``).
"""

from __future__ import annotations

import math
from typing import Any

from checkpoint_mcp.clock import duration_text, iso_after, iso_before
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.verdicts import Note, Refuse, Require, Step, Verdict
from checkpoint_mcp.intercept.policy import Budget, Scope
from checkpoint_mcp.intercept.policy.pointer import MISSING, resolve
from checkpoint_mcp.journal.conditions import Unmet, WithinBudget, WithinLimit
from checkpoint_mcp.refusals import LimitReached
from checkpoint_mcp.wire import dumps

EVENT_KIND = "limit"
"""The kind of the chain event a call refused by a limit or budget leaves on its workflow (``journal/notes.py``)."""


def refused(facts: Facts, refusal: LimitReached) -> Refuse:
    """``refusal``, with its note on the workflow's chain: what was refused and why, never the arguments."""
    kept = ("tool", "reason", "rule", "scope", "counted", "spent", "amount", "runsAgainAfter", "limit", "budget")
    detail = {key: refusal.data[key] for key in kept if key in refusal.data}
    return Refuse(refusal, (Note(facts.place.lineage.head, EVENT_KIND, None, detail),))


def scope_key(scope: Scope, facts: Facts, part: str | None = None) -> str:
    """Where a limit or budget counts this call: its workflow (the lineage's root), the whole journal, or every
    workflow of its principal (`checkpoint serve --issuer`; a call of no principal counts per workflow); ``part``:
    the sub-rule whose own limit or budget it is, whose calls are counted apart from the tool's others."""
    if scope is Scope.JOURNAL:
        key = "journal"
    elif scope is Scope.PRINCIPAL and facts.known.principal is not None:
        key = f"principal:{facts.known.principal}"
    else:
        key = f"workflow:{facts.place.lineage.root}"
    return key if part is None else f"{key} when:{part}"


def metered_name(call: Call, facts: Facts) -> str:
    """The name the call's tool is counted by: the name the client sees (``mail__send`` behind ``--upstreams``)."""
    return facts.tool_prefix + call.name


def amount(budget: Budget, arguments: dict[str, Any]) -> float | None:
    """The number at the budget's pointer in ``arguments``: None unless it is a number (a boolean is none), 0 or
    more, that fits a 64-bit float."""
    value = resolve(arguments, budget.tokens)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an integer of hundreds of digits does not fit
    except OverflowError:
        return None
    return number + 0.0 if math.isfinite(number) and number >= 0 else None  # + 0.0: -0.0 is 0


class LimitCheck:
    """``limit``: a requirement that the window holds fewer calls than the limit."""

    def check(self, call: Call, facts: Facts) -> Step:
        """``WithinLimit`` for a tool under a limit; nothing for any other."""
        limit = call.rule.limit
        if limit is None:
            return None
        since = iso_before(limit.per_seconds)
        return Require(
            WithinLimit(scope_key(limit.scope, facts, limit.part), limit.calls, since, metered_name(call, facts))
        )

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """The window is full: refused, saying when the oldest call that counts leaves it."""
        limit = call.rule.limit
        assert limit is not None
        counted = unmet.counted
        oldest = counted[len(counted) - limit.calls] if len(counted) >= limit.calls else counted[0]
        return refused(
            facts,
            LimitReached.over_limit(
                workflow=facts.place.lineage.head,
                tool=metered_name(call, facts),
                rule=call.rule.source,
                scope=limit.scope.value,
                calls=limit.calls,
                per=duration_text(limit.per_seconds),
                counted=len(counted),
                after=iso_after(oldest.at, limit.per_seconds),
            ),
        )


class BudgetCheck:
    """``budget``: a requirement that the window's amounts, with this call's, stay within the budget."""

    def check(self, call: Call, facts: Facts) -> Step:
        """``WithinBudget`` for a tool under a budget; refused when the call's amount is not one (``amount``)."""
        budget = call.rule.budget
        if budget is None:
            return None
        spends = amount(budget, call.arguments)
        if spends is None:
            found = resolve(call.arguments, budget.tokens)
            refusal = LimitReached.bad_amount(
                workflow=facts.place.lineage.head,
                tool=metered_name(call, facts),
                rule=call.rule.source,
                scope=budget.scope.value,
                pointer=budget.pointer,
                got="nothing" if found is MISSING else _shown(found),
            )
            return refused(facts, refusal)
        since = iso_before(budget.per_seconds)
        key = scope_key(budget.scope, facts, budget.part)
        return Require(WithinBudget(key, spends, budget.most, since, metered_name(call, facts)))

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
                tool=metered_name(call, facts),
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


def _shown(value: Any) -> str:
    """A value as the refusal shows it: its JSON, cut to 80 characters."""
    text = dumps(value)
    return text if len(text) <= 80 else text[:79] + "…"
