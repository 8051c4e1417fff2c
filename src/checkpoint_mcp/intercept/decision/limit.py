"""The check of a tool policy's ``limit``: at most so many calls of the tool run per rolling window.

``limit = { calls = 3, per = "1h" }`` counts the tool's calls that ran or are running (a call in flight counts,
so two concurrent calls cannot both pass a limit of one; a refused call does not) in the workflow, or, with
``scope = "journal"``, in every workflow of the journal: a cap for a fleet, or with ``scope = "principal"`` in every
workflow of the call's principal (`checkpoint serve` with tokens from an identity provider), so that one person's
runaway agent cannot spend everyone's allowance. The count and the reservation are one
transaction (``WithinLimit``), so replicas racing on one journal together run no more than the limit.
"""

from __future__ import annotations

from checkpoint_mcp.clock import duration_text, iso_after, iso_before
from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.verdicts import Note, Refuse, Require, Step, Verdict
from checkpoint_mcp.intercept.policy import Scope
from checkpoint_mcp.journal.conditions import Unmet, WithinLimit
from checkpoint_mcp.refusals import LimitReached

EVENT_KIND = "limit"
"""The kind of the chain event a call refused by a limit or budget leaves on its workflow (``journal/notes.py``)."""


def refused(facts: Facts, refusal: LimitReached) -> Refuse:
    """``refusal``, with its note on the workflow's chain: what was refused and why, never the arguments."""
    kept = ("tool", "reason", "rule", "scope", "counted", "spent", "amount", "runsAgainAfter", "limit", "budget")
    detail = {key: refusal.data[key] for key in kept if key in refusal.data}
    return Refuse(refusal, (Note(facts.place.lineage.head, EVENT_KIND, None, detail),))


def scope_key(scope: Scope, facts: Facts) -> str:
    """Where a limit or budget counts this call: its workflow (the lineage's root), the whole journal, or every
    workflow of its principal (`checkpoint serve --issuer`; a call of no principal counts per workflow)."""
    if scope is Scope.JOURNAL:
        return "journal"
    principal = facts.known.principal
    if scope is Scope.PRINCIPAL and principal is not None:
        return f"principal:{principal}"
    return f"workflow:{facts.place.lineage.root}"


class LimitCheck:
    """``limit``: a requirement that the window holds fewer calls than the limit."""

    def check(self, call: Call, facts: Facts) -> Step:
        """``WithinLimit`` for a tool under a limit; nothing for any other."""
        limit = call.rule.limit
        if limit is None:
            return None
        return Require(WithinLimit(scope_key(limit.scope, facts), limit.calls, iso_before(limit.per_seconds)))

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
                tool=call.name,
                rule=call.rule.source,
                scope=limit.scope.value,
                calls=limit.calls,
                per=duration_text(limit.per_seconds),
                counted=len(counted),
                after=iso_after(oldest.at, limit.per_seconds),
            ),
        )
