"""Tool policies (`--policy FILE`) as the proxy applies them: the frozen rules, one per tool, and the policy that
says which rule a tool gets. What a file may say, and how it is read and checked, is ``grammar.py``.

Which rule a tool gets: an exact name wins over every glob; among matching globs the one with more literal
(non-wildcard) characters wins, then the one with fewer wildcards, then the one written first in the file.
Keys the winning table leaves out come from ``[default]``, then from the built-in defaults (journal, repeat
allow, window 24h, confirm_within 10m, no limit, no budget), which are exactly Checkpoint's behaviour without a
policy (``BUILT_IN``).

A tool's table may hold sub-rules chosen by an argument (``[[tools.NAME.when]]``, ``SubRule``): the first whose
test matches the call's arguments gives the call its rule, its keys over the tool's own; a call no sub-rule
matches gets the tool's rule. The choice is made once per call, when the call is read (``ToolRule.chosen``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy.argument_match import ArgumentMatch, Read
from checkpoint_mcp.intercept.policy.identity import IdentityRule
from checkpoint_mcp.intercept.policy.pointer import MISSING, resolve

DEFAULT_WINDOW: Final = 24 * 3600.0  # seconds a repeat is looked for, when no table says
DEFAULT_PROBE_TIMEOUT: Final = 10.0  # seconds a probe may take before the call stays in doubt
DEFAULT_CONFIRM_WITHIN: Final = 600.0  # seconds a refused repeat may be confirmed in, under repeat = "confirm"
DEFAULT_APPROVAL_EXPIRES: Final = 3600.0  # seconds a granted approval stays usable, under approve
MATCHER_TESTS: Final = ("equals", "exists", "contains", "nonempty")


class Repeat(StrEnum):
    """What a call gets when it repeats, by its content, a call journaled within the window."""

    ALLOW = "allow"  # runs again at the next sequence: Checkpoint's behaviour without a policy
    REPLAY = "replay"  # the original's stored result, as a replay
    REFUSE = "refuse"  # RepeatRefused, naming the original
    CONFIRM = "confirm"  # RepeatRefused once; the same call sent again within confirm_within runs


class WithinSession(StrEnum):
    """What a repeat gets when it and its original are in one unbroken session (the same proxy process or gateway
    session, no clear or compaction between them, and the original's answer reached the client)."""

    CATCH = "catch"  # the repeat rule applies as to any repeat: what a table without the key means
    RUN = "run"  # the agent's own repeat within its session runs; what `init` writes


class Approve(StrEnum):
    """Who approves a call of a tool under ``approve``, before it runs (once)."""

    OPERATOR = "operator"  # a person, by `checkpoint journal approve ID` or the pages; the call is refused till then
    ELICIT = "elicit"  # the client's user, asked in the same request where the client can; else as operator


class Scope(StrEnum):
    """Where the calls a limit or budget counts are counted."""

    WORKFLOW = "workflow"  # the calls of the workflow the call is journaled to (what a table without scope means)
    JOURNAL = "journal"  # the calls of every workflow of the journal: a cap for a whole fleet
    PRINCIPAL = "principal"  # the calls of every workflow of the principal (`serve --issuer`); else as workflow


@dataclass(frozen=True)
class Limit:
    """``limit = { calls = N, per = "1h" }``: at most ``calls`` calls of the tool run per rolling ``per``."""

    calls: int
    per_seconds: float
    scope: Scope = Scope.WORKFLOW
    part: str | None = None  # a sub-rule's own limit: the name its calls are counted under, apart from the tool's


@dataclass(frozen=True)
class Budget:
    """``budget = { sum = "/amount", max = 100, per = "24h" }``: the numbers at ``pointer`` in the arguments of the
    tool's calls that ran within a rolling ``per`` add up to at most ``most``."""

    pointer: str
    tokens: tuple[str, ...] = field(repr=False, compare=False)
    most: float
    per_seconds: float
    scope: Scope = Scope.WORKFLOW
    part: str | None = None  # a sub-rule's own budget: the name its calls are counted under, apart from the tool's


@dataclass(frozen=True)
class Matcher:
    """A test of the value at ``pointer`` in a probe result's ``structuredContent``; every test given must hold.

    ``equals``: JSON equality (``1`` equals ``1.0``, ``true`` is not ``1``). ``exists``: whether the pointer
    resolves. ``contains``: a substring of a string, an element of an array, or a key of an object.
    ``nonempty``: whether the value is there and not null, ``""``, ``[]`` or ``{}``.
    """

    pointer: str
    tokens: tuple[str, ...] = field(repr=False, compare=False)
    tests: tuple[tuple[str, Any], ...]

    def test(self, document: Any) -> bool:
        """Whether every test holds for the value at the pointer in ``document``."""
        value = resolve(document, self.tokens)
        return all(_holds(kind, expected, value) for kind, expected in self.tests)

    def describe(self) -> str:
        """The matcher as the operator wrote it, e.g. ``/count equals 1``."""
        return " and ".join(f"{self.pointer or '(whole)'} {kind} {toml_value(v)}" for kind, v in self.tests)


@dataclass(frozen=True)
class Probe:
    """A read-only tool of the same upstream, called to learn whether an in-doubt call landed."""

    tool: str
    arguments: Mapping[str, str]  # the probe's argument name -> JSON pointer into the in-doubt call's arguments
    happened_if: Matcher | None
    not_happened_if: Matcher | None
    timeout: float = DEFAULT_PROBE_TIMEOUT
    settle_after: float = 0.0  # a "did not happen" counts only for a call started at least this long ago


@dataclass(frozen=True)
class Idempotency:
    """Where the proxy puts the key the upstream deduplicates on: one of ``argument`` and ``header`` is set."""

    argument: str | None = None
    header: str | None = None  # for --upstream-url only


@dataclass(frozen=True)
class ToolRule:
    """The effective rule for one tool: its table's keys over ``[default]`` over the built-in defaults."""

    journal: bool = True
    repeat: Repeat = Repeat.ALLOW
    window_seconds: float = DEFAULT_WINDOW
    probe: Probe | None = None
    idempotency: Idempotency | None = None
    read_only: bool = False  # declared in the policy: no side effect, may serve as a probe, never a repeat
    idempotent: bool = False  # the server's promise (idempotentHint): a repeat runs, an in-doubt call is re-sent
    identity: IdentityRule | None = None  # what part of the arguments makes a repeat; None: all of them
    confirm_seconds: float = DEFAULT_CONFIRM_WITHIN  # under repeat = "confirm": how long a refusal may be confirmed
    approve: Approve | None = None  # each call waits for a person's approval of its exact arguments
    approval_seconds: float = DEFAULT_APPROVAL_EXPIRES  # how long a granted approval stays usable
    within_session: WithinSession = WithinSession.CATCH  # a repeat within one unbroken session: caught, or runs
    repeats_run: bool = False  # repeat = "allow" written for it (its table or [default]), or idempotent
    limit: Limit | None = None  # at most so many calls per rolling window
    budget: Budget | None = None  # the amounts of the calls that ran per rolling window, at most so much
    source: str = "built-in"  # the table that won, e.g. 'tools."send_*"', for `checkpoint policy check`
    when: tuple[SubRule, ...] = ()  # sub-rules chosen by an argument, in order: the first that matches decides

    def chosen(self, arguments: Mapping[str, Any]) -> ToolRule:
        """The rule of a call with ``arguments``: the first sub-rule whose test matches, else this rule."""
        if not self.when:
            return self
        read = Read(arguments)  # what each pointer holds, read once for every sub-rule
        for sub in self.when:
            if sub.match.test(read):
                return sub.rule
        return self

    @property
    def variants(self) -> tuple[ToolRule, ...]:
        """This rule and every sub-rule a call's arguments may choose: what a question about the tool, before its
        arguments are read, must ask of each."""
        return (self, *(sub.rule for sub in self.when))

    @property
    def catches_repeats(self) -> bool:
        """Whether a call of this tool is ever looked up as a repeat (journaled, not read-only, not allow); an
        idempotent tool's is, to find an in-doubt original to re-send (a completed one runs again), and so is one
        under ``approve``, so that a person is never asked to approve again a call that may have run (in doubt)."""
        repeats = self.repeat is not Repeat.ALLOW or self.idempotent or self.approve is not None
        return self.journal and not self.read_only and repeats


@dataclass(frozen=True)
class SubRule:
    """``[[tools.NAME.when]]``: a call whose arguments ``match`` gets ``rule`` (the sub-rule's keys over the tool's)."""

    name: str
    match: ArgumentMatch
    rule: ToolRule


BUILT_IN: Final = ToolRule()
"""The rule of every tool where no policy is given: Checkpoint's behaviour without one."""


@dataclass(frozen=True)
class Pattern:
    """A ``[tools.NAME]`` table's name: exact, or a glob compiled to an anchored regular expression."""

    text: str
    regex: re.Pattern[str] | None  # None for an exact name
    wildcards: int
    literals: int
    order: int
    keys: Mapping[str, Any]  # the table's own keys, already checked


@dataclass(frozen=True)
class Policy:
    """A checked policy file. ``rule_for`` is what the interceptor asks, once per call."""

    path: str
    default: ToolRule
    exact: Mapping[str, ToolRule]
    globs: tuple[tuple[Pattern, ToolRule], ...]  # most specific first

    def rule_for(self, tool: str) -> ToolRule:
        """The effective rule for ``tool``: its exact table, else the most specific matching glob, else [default]."""
        rule = self.exact.get(tool)
        if rule is not None:
            return rule
        for pattern, glob_rule in self.globs:
            assert pattern.regex is not None
            if pattern.regex.fullmatch(tool):
                return glob_rule
        return self.default

    def named_tools(self) -> frozenset[str]:
        """Tools the file names exactly: its ``[tools.NAME]`` tables and its probes' tools."""
        names = set(self.exact)
        names.update(rule.probe.tool for rule in self.rules() if rule.probe is not None)
        return frozenset(names)

    def rules(self) -> Iterable[ToolRule]:
        """Every tool's rule of the file, [default] first (not their sub-rules: they share the tool's probe and key)."""
        yield self.default
        yield from self.exact.values()
        yield from (rule for _, rule in self.globs)

    def header_tools(self) -> list[str]:
        """The tables whose idempotency key goes in an HTTP header (allowed with --upstream-url only)."""
        return [
            rule.source for rule in self.rules() if rule.idempotency is not None and rule.idempotency.header is not None
        ]

    def check_tools(self, tools: Iterable[Mapping[str, Any]], complete: bool = True) -> list[str]:
        """Check the policy against the upstream's ``tools/list``; returns warnings for tools it does not have.

        ``complete``: ``tools`` is the whole listing, so a probe's tool it lacks cannot be shown read-only either
        (refused); otherwise (pages still to come) only a listed tool without the hint is refused.

        Raises:
            UsageError: a probe's tool is neither marked ``readOnlyHint: true`` upstream nor declared
                ``read_only = true`` in the policy.
        """
        listed: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
                listed[tool["name"]] = tool
        warnings = [
            f"{self.path}: [tools.{table_key(name)}] names a tool the upstream does not list"
            for name in sorted(self.exact)
            if name not in listed
        ]
        for pattern, _ in self.globs:
            assert pattern.regex is not None
            if not any(pattern.regex.fullmatch(name) for name in listed):
                warnings.append(f"{self.path}: [tools.{table_key(pattern.text)}] matches no tool the upstream lists")
        for rule in self.rules():
            probe = rule.probe
            if probe is None:
                continue
            annotations = listed.get(probe.tool, {}).get("annotations")
            hinted = isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True
            unknown = probe.tool not in listed and not complete
            if not hinted and not unknown and not self.rule_for(probe.tool).read_only:
                raise UsageError(
                    f"{self.path}: [{rule.source}.probe] tool: {probe.tool!r} is not read-only (the upstream does "
                    f"not mark it readOnlyHint: true); a probe must not change anything. If it only reads, "
                    f"declare it in the policy: [tools.{table_key(probe.tool)}] read_only = true"
                )
            if probe.tool not in listed:
                warnings.append(f"{self.path}: [{rule.source}.probe] tool {probe.tool!r} is not listed upstream")
        return warnings


def _holds(kind: str, expected: Any, value: Any) -> bool:
    if kind == "exists":
        return (value is not MISSING) is expected
    if kind == "nonempty":
        return _nonempty(value) is expected
    if value is MISSING:
        return False
    if kind == "equals":
        return json_equal(value, expected)
    return _contains(value, expected)


def _nonempty(value: Any) -> bool:
    if value is MISSING or value is None:
        return False
    return not (isinstance(value, str | list | dict) and len(value) == 0)


def _contains(value: Any, expected: Any) -> bool:
    if isinstance(value, list):
        return any(json_equal(item, expected) for item in value)
    return isinstance(value, str | dict) and isinstance(expected, str) and expected in value


def json_equal(left: Any, right: Any) -> bool:
    """Equality of two JSON values: numbers by value (``1 == 1.0``), but a boolean is never a number."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left is right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    return type(left) is type(right) and left == right


def kind_of(value: Any) -> str:
    """What a TOML value is, for an error: ``a string``, ``an integer``, ``a table``…"""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def toml_value(value: Any) -> str:
    """A value as it is written in TOML, for an error or a description."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def table_key(key: str) -> str:
    """A TOML key as it is written in a table header: bare when it can be, quoted otherwise."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)
