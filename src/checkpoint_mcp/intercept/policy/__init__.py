"""Tool policies (`--policy FILE`): what a policy file may say (``grammar``), the frozen rules the proxy applies
(``rules``), the JSON pointers they use (``pointer``), a call's identity for repeats (``identity``), what a
sub-rule tests in a call's arguments (``argument_match``) and how it reads a shell command line
(``command_line``), what an upstream's annotations may decide where the policy is silent (``annotations``), and
what `checkpoint policy check` prints (``report``). Data, checked once at start; nothing here runs at a call's
time but ``Policy.rule_for``, ``ToolRule.chosen`` and the rules' own small methods.

May import: ``errors``, ``clock``, ``signature``; nothing else of the interceptor's room.
"""

from checkpoint_mcp.intercept.policy.grammar import load_policy, parse_policy
from checkpoint_mcp.intercept.policy.rules import (
    BUILT_IN,
    DEFAULT_APPROVAL_EXPIRES,
    DEFAULT_CONFIRM_WITHIN,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_WINDOW,
    Approve,
    Budget,
    Idempotency,
    Limit,
    Matcher,
    Policy,
    Probe,
    Repeat,
    Scope,
    SubRule,
    ToolRule,
    WithinSession,
    json_equal,
)

__all__ = [
    "BUILT_IN",
    "DEFAULT_APPROVAL_EXPIRES",
    "DEFAULT_CONFIRM_WITHIN",
    "DEFAULT_PROBE_TIMEOUT",
    "DEFAULT_WINDOW",
    "Approve",
    "Budget",
    "Idempotency",
    "Limit",
    "Matcher",
    "Policy",
    "Probe",
    "Repeat",
    "Scope",
    "SubRule",
    "ToolRule",
    "WithinSession",
    "json_equal",
    "load_policy",
    "parse_policy",
]
