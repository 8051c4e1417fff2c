"""The check of a tool policy's ``approve``: a call runs only on a person's approval of that exact call.

The requirement (``UsesApproval``) names the call by its identity where its tool's policy names a part of the
arguments, else by its signature; the reservation finds the call's newest request and, when it is granted and
unexpired, uses it in the same transaction that reserves the call, so one approval never runs two calls (on one
proxy, across fresh proxies, across replicas). Without one, the call gets ``AskApproval``: its request is named in
the refusal (a new one is made, durable, when there is none waiting), or the client's user is asked
(``approve = "elicit"``, ``asking.py``). Nothing the agent sends can approve a call.
"""

from __future__ import annotations

from checkpoint_mcp.intercept.decision.call import Call
from checkpoint_mcp.intercept.decision.facts import Facts
from checkpoint_mcp.intercept.decision.verdicts import AskApproval, Require, Step, Verdict
from checkpoint_mcp.journal.conditions import Unmet, UsesApproval


class ApprovalCheck:
    """``approve``: a requirement that the call's approval is granted and unused."""

    def check(self, call: Call, facts: Facts) -> Step:
        """``UsesApproval`` for a tool under ``approve``; nothing for any other."""
        if call.rule.approve is None:
            return None
        return Require(UsesApproval(call.identity or call.signature))

    def unmet(self, call: Call, facts: Facts, unmet: Unmet) -> Verdict:
        """No usable approval: ask for one."""
        return AskApproval(call.rule, unmet.approval)
