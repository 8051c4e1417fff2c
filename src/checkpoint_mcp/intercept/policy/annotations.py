"""What an upstream's annotations may decide (`--trust-annotations`): only what the operator's policy leaves open.

A tool the upstream marks ``readOnlyHint: true`` passes through unjournaled under ``--trust-annotations`` (its
calls read, so there is nothing to replay or to be in doubt about), but only where its rule, and each of its
sub-rules (``[[tools.NAME.when]]``), asks nothing of the journal: no ``approve`` (a person's approval is used by the
call's reservation), no ``limit`` or ``budget`` (a call is counted as it is reserved), no ``probe`` or
``idempotency`` (ways to settle an in-doubt call). Where the policy says any of these, the hint is ignored and the
rule applies as written: a server cannot waive the operator's rule by what it says of its own tools.
"""

from __future__ import annotations

from checkpoint_mcp.intercept.policy.rules import ToolRule


def hint_may_skip_journal(rule: ToolRule) -> bool:
    """Whether a ``readOnlyHint: true`` may let ``rule``'s tool pass unjournaled (``--trust-annotations``)."""
    return all(
        each is None
        for one in rule.variants
        for each in (one.approve, one.limit, one.budget, one.probe, one.idempotency)
    )
