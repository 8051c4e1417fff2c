"""Tool policies (`--policy FILE`): a TOML file read once at start into frozen rules, one per tool.

The file's shape (docs/policies.md documents every key)::

    [default]                      # tools no rule names
    repeat = "refuse"              # allow | replay | refuse: a call repeating a journaled one by its content
    window = "24h"                 # how far back a repeat is looked for

    [tools.send_email]             # an exact tool name
    repeat = "replay"              # or "confirm": refused once, runs when sent again within confirm_within
    match = ["/to", "/subject"]    # the call's identity for repeats (or ignore = [...]; repeat_identity.py)
    [tools.send_email.probe]       # a read-only tool that says whether an in-doubt call landed
    tool = "list_outbox"
    arguments = { to = "/to", subject = "/subject" }      # JSON pointers into the in-doubt call's arguments
    happened_if = { pointer = "/count", equals = 1 }      # tested on the probe result's structuredContent
    not_happened_if = { pointer = "/count", equals = 0 }

    [tools.charge_card]
    idempotency = { argument = "idempotency_key" }        # or { header = "Idempotency-Key" } (--upstream-url)

    [tools."read_*"]               # a glob: * ? [abc] [!abc]
    journal = false

    [tools.set_status]
    idempotent = true              # the server's promise: a repeat runs, an in-doubt call is re-sent as is

    [tools.delete_repo]
    approve = "operator"           # or "elicit": each call waits for a person's approval of its exact arguments
    approval_expires = "1h"        # how long a granted approval stays usable (once)

Which rule a tool gets: an exact name wins over every glob; among matching globs the one with more literal
(non-wildcard) characters wins, then the one with fewer wildcards, then the one written first in the file.
Keys the winning table leaves out come from ``[default]``, then from the built-in defaults (journal, repeat
allow, window 24h, confirm_within 10m), which are exactly Checkpoint's behaviour without a policy. ``match``,
``ignore`` and ``normalize`` belong to one tool's table: pointers name one tool's arguments.

Everything is checked here, once, so the hot path never re-checks: an unknown table or key, a wrong type, a bad
glob, duration, pointer or matcher is a ``UsageError`` naming the file, the table and the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from checkpoint_mcp.clock import parse_duration
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.pointer import MISSING, PointerError, parse_pointer, resolve
from checkpoint_mcp.intercept.repeat_identity import IDENTITY_KEYS, IdentityRule, parse_identity

DEFAULT_WINDOW: Final = 24 * 3600.0  # seconds a repeat is looked for, when no table says
DEFAULT_PROBE_TIMEOUT: Final = 10.0  # seconds a probe may take before the call stays in doubt
DEFAULT_CONFIRM_WITHIN: Final = 600.0  # seconds a refused repeat may be confirmed in, under repeat = "confirm"
DEFAULT_APPROVAL_EXPIRES: Final = 3600.0  # seconds a granted approval stays usable, under approve
_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RULE_KEYS: Final = frozenset(
    {"journal", "repeat", "window", "probe", "idempotency", "read_only", "idempotent", "confirm_within", "approve"}
    | {"approval_expires", "within_session", *IDENTITY_KEYS}
)
_PROBE_KEYS: Final = frozenset({"tool", "arguments", "happened_if", "not_happened_if", "timeout", "settle_after"})
_MATCHER_TESTS: Final = ("equals", "exists", "contains", "nonempty")


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
        return " and ".join(f"{self.pointer or '(whole)'} {kind} {_toml_value(v)}" for kind, v in self.tests)


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
    source: str = "built-in"  # the table that won, e.g. 'tools."send_*"', for `checkpoint policy check`

    @property
    def catches_repeats(self) -> bool:
        """Whether a call of this tool is ever looked up as a repeat (journaled, not read-only, not allow); an
        idempotent tool's is, to find an in-doubt original to re-send (a completed one runs again), and so is one
        under ``approve``, so that a person is never asked to approve again a call that may have run (in doubt)."""
        repeats = self.repeat is not Repeat.ALLOW or self.idempotent or self.approve is not None
        return self.journal and not self.read_only and repeats


@dataclass(frozen=True)
class _Pattern:
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
    globs: tuple[tuple[_Pattern, ToolRule], ...]  # most specific first

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
        """Every rule of the file, [default] first."""
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
            f"{self.path}: [tools.{_quote(name)}] names a tool the upstream does not list"
            for name in sorted(self.exact)
            if name not in listed
        ]
        for pattern, _ in self.globs:
            assert pattern.regex is not None
            if not any(pattern.regex.fullmatch(name) for name in listed):
                warnings.append(f"{self.path}: [tools.{_quote(pattern.text)}] matches no tool the upstream lists")
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
                    f"declare it in the policy: [tools.{_quote(probe.tool)}] read_only = true"
                )
            if probe.tool not in listed:
                warnings.append(f"{self.path}: [{rule.source}.probe] tool {probe.tool!r} is not listed upstream")
        return warnings


def load_policy(path: str | Path) -> Policy:
    """Read and check the policy file at ``path``.

    Raises:
        UsageError: the file cannot be read, is not TOML, or any table, key, type or value is wrong; the message
            names the file, the table and the key.
    """
    name = str(path)
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"cannot read the policy file {name}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{name}: not a valid TOML file: {exc}") from exc
    return parse_policy(document, name)


def parse_policy(document: Mapping[str, Any], name: str) -> Policy:
    """Check a policy already read from TOML; ``name`` is the file named in errors.

    Raises:
        UsageError: any table, key, type or value is wrong.
    """
    for key in document:
        if key not in ("default", "tools"):
            raise UsageError(f"{name}: unknown top-level key {key!r}: a policy has only [default] and [tools.NAME]")
    default_keys = _rule_keys(document.get("default", {}), name, "default")
    for key in ("probe", "idempotency", "read_only", "idempotent", *sorted(IDENTITY_KEYS)):
        if key in default_keys:
            raise UsageError(f"{name}: [default] {key}: belongs to one tool; put it under [tools.NAME]")
    default = _build_rule({}, default_keys, "default")
    tools = document.get("tools", {})
    if not isinstance(tools, dict):
        raise UsageError(f"{name}: tools: must be tables, [tools.NAME] (got {_kind(tools)})")
    exact: dict[str, ToolRule] = {}
    globs: list[_Pattern] = []
    for order, (pattern_text, table) in enumerate(tools.items()):
        where = f"tools.{_quote(pattern_text)}"
        keys = _rule_keys(table, name, where)
        pattern = _compile_pattern(pattern_text, name, where, order, keys)
        if pattern.regex is None:
            exact[pattern_text] = _build_rule(default_keys, keys, where)
        else:
            globs.append(pattern)
    globs.sort(key=lambda p: (-p.literals, p.wildcards, p.order))
    return Policy(
        path=name,
        default=default,
        exact=MappingProxyType(exact),
        globs=tuple((p, _build_rule(default_keys, p.keys, f"tools.{_quote(p.text)}")) for p in globs),
    )


def _rule_keys(table: Any, name: str, where: str) -> dict[str, Any]:
    """The table's keys, each checked and converted; only the keys it gives."""
    if not isinstance(table, dict):
        raise UsageError(f"{name}: [{where}] must be a table (got {_kind(table)})")
    checked: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _RULE_KEYS:
            raise UsageError(f"{name}: [{where}] {key}: unknown key; a rule has {', '.join(sorted(_RULE_KEYS))}")
        checked[key] = _rule_value(key, value, name, where)
    if "confirm_within" in checked and checked.get("repeat", Repeat.CONFIRM) is not Repeat.CONFIRM:
        raise UsageError(
            f'{name}: [{where}] confirm_within: applies to repeat = "confirm" only (this table says repeat = '
            f'"{checked["repeat"].value}"); remove one of the two'
        )
    if "approval_expires" in checked and "approve" not in checked and where != "default":
        raise UsageError(f'{name}: [{where}] approval_expires: applies with approve = "operator" or "elicit" only')
    if checked.get("journal") is False:
        for key in (
            "repeat",
            "window",
            "probe",
            "idempotency",
            "idempotent",
            "confirm_within",
            "approve",
            "within_session",
            *IDENTITY_KEYS,
        ):
            if key in checked:
                raise UsageError(
                    f"{name}: [{where}] {key}: has no effect with journal = false (an unjournaled call is never "
                    "a repeat, never in doubt); remove one of the two"
                )
    if checked.get("idempotent") is True:
        for key in ("repeat", "probe", "idempotency"):
            if key in checked and (key != "repeat" or checked[key] is not Repeat.ALLOW):
                raise UsageError(
                    f"{name}: [{where}] {key}: conflicts with idempotent = true (a repeat of an idempotent tool "
                    "runs, and an in-doubt call is re-sent as is); remove one of the two"
                )
    if where != "default":  # [default] refuses these keys by name (parse_policy)
        checked["identity"] = parse_identity(checked, f"{name}: [{where}]")
    return checked


def _rule_value(key: str, value: Any, name: str, where: str) -> Any:
    at = f"{name}: [{where}] {key}"
    if key in ("journal", "read_only", "idempotent"):
        if not isinstance(value, bool):
            raise UsageError(f"{at}: must be true or false (got {_kind(value)})")
        return value
    if key in ("repeat", "approve", "within_session"):
        kind = {"repeat": Repeat, "approve": Approve, "within_session": WithinSession}[key]
        if value not in tuple(kind):
            choices = ", ".join(f'"{choice}"' for choice in kind)
            raise UsageError(f"{at}: must be one of {choices} (got {_toml_value(value)})")
        return kind(value)
    if key in ("window", "confirm_within", "approval_expires"):
        return parse_duration(value, at)
    if key in IDENTITY_KEYS:
        return value  # checked as a whole by parse_identity: match and ignore exclude each other
    if key == "probe":
        return _probe(value, name, f"{where}.probe")
    return _idempotency(value, at)


def _build_rule(defaults: Mapping[str, Any], keys: Mapping[str, Any], source: str) -> ToolRule:
    merged = {**defaults, **keys}
    idempotent = merged.get("idempotent", False)
    return ToolRule(
        journal=merged.get("journal", True),
        # [default]'s repeat does not reach an idempotent tool: the server promises a repeat is harmless.
        repeat=Repeat.ALLOW if idempotent else merged.get("repeat", Repeat.ALLOW),
        window_seconds=merged.get("window", DEFAULT_WINDOW),
        probe=merged.get("probe"),
        idempotency=merged.get("idempotency"),
        read_only=merged.get("read_only", False),
        idempotent=idempotent,
        identity=keys.get("identity"),
        confirm_seconds=merged.get("confirm_within", DEFAULT_CONFIRM_WITHIN),
        # A read-only tool changes nothing: [default]'s approve does not reach it (its own table's does).
        approve=keys.get("approve") if merged.get("read_only") else merged.get("approve"),
        approval_seconds=merged.get("approval_expires", DEFAULT_APPROVAL_EXPIRES),
        within_session=merged.get("within_session", WithinSession.CATCH),
        source=source,
    )


def _compile_pattern(text: str, name: str, where: str, order: int, keys: Mapping[str, Any]) -> _Pattern:
    """An exact name (no ``*``, ``?`` or ``[``), or a glob compiled to an anchored regular expression."""
    at = f"{name}: [{where}]"
    if text == "" or text.strip() != text:
        raise UsageError(f"{at}: a tool name or glob must be non-empty, without leading or trailing spaces")
    parts: list[str] = []
    wildcards = literals = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == "*":
            parts.append(".*")
            wildcards += 1
        elif char == "?":
            parts.append(".")
            wildcards += 1
        elif char == "[":
            end = text.find("]", index + 1)
            body = text[index + 1 : end]
            if end == -1 or body in ("", "!"):
                raise UsageError(f"{at}: bad glob {text!r}: '[' at {index} opens a set that is never closed")
            members = body[1:] if body.startswith("!") else body
            escaped = "".join(
                "-" if c == "-" and 0 < i < len(members) - 1 else re.escape(c) for i, c in enumerate(members)
            )
            parts.append("[" + ("^" if body.startswith("!") else "") + escaped + "]")
            wildcards += 1
            index = end
        elif char == "]":
            raise UsageError(f"{at}: bad glob {text!r}: ']' at {index} closes no set")
        else:
            parts.append(re.escape(char))
            literals += 1
        index += 1
    try:
        regex = re.compile("".join(parts), re.DOTALL) if wildcards else None
    except re.error as exc:  # a range that runs backwards, e.g. [z-a]
        raise UsageError(f"{at}: bad glob {text!r}: {exc.msg}") from exc
    return _Pattern(text, regex, wildcards, literals, order, keys)


def _probe(value: Any, name: str, where: str) -> Probe:
    if not isinstance(value, dict):
        raise UsageError(f"{name}: [{where}] must be a table (got {_kind(value)})")
    for key in value:
        if key not in _PROBE_KEYS:
            raise UsageError(f"{name}: [{where}] {key}: unknown key; a probe has {', '.join(sorted(_PROBE_KEYS))}")
    tool = value.get("tool")
    if not isinstance(tool, str) or not tool or any(c in tool for c in "*?["):
        raise UsageError(f"{name}: [{where}] tool: must name one tool exactly (got {_toml_value(tool)})")
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        raise UsageError(f'{name}: [{where}] arguments: must be a table of name = "/json/pointer"')
    for argument, pointer in arguments.items():
        at = f"{name}: [{where}] arguments.{_quote(argument)}"
        if not isinstance(pointer, str):
            raise UsageError(f'{at}: must be a JSON pointer string such as "/to" (got {_kind(pointer)})')
        try:
            parse_pointer(pointer)
        except PointerError as exc:
            raise UsageError(f"{at}: {exc}") from exc
    happened = _matcher(value.get("happened_if"), f"{name}: [{where}] happened_if")
    not_happened = _matcher(value.get("not_happened_if"), f"{name}: [{where}] not_happened_if")
    if happened is None and not_happened is None:
        raise UsageError(f"{name}: [{where}] happened_if: a probe needs happened_if, not_happened_if or both")
    timeout = DEFAULT_PROBE_TIMEOUT
    if "timeout" in value:
        timeout = parse_duration(value["timeout"], f"{name}: [{where}] timeout")
    settle_after = 0.0
    if "settle_after" in value:
        settle_after = parse_duration(value["settle_after"], f"{name}: [{where}] settle_after")
    return Probe(tool, MappingProxyType(dict(arguments)), happened, not_happened, timeout, settle_after)


def _matcher(value: Any, at: str) -> Matcher | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f'{at}: must be a table such as {{ pointer = "/count", equals = 1 }} (got {_kind(value)})')
    for key in value:
        if key != "pointer" and key not in _MATCHER_TESTS:
            raise UsageError(f"{at}.{key}: unknown key; a matcher has pointer and {', '.join(_MATCHER_TESTS)}")
    pointer = value.get("pointer")
    if not isinstance(pointer, str):
        raise UsageError(f'{at}.pointer: a JSON pointer string into structuredContent is required, e.g. "/count"')
    try:
        tokens = parse_pointer(pointer)
    except PointerError as exc:
        raise UsageError(f"{at}.pointer: {exc}") from exc
    tests: list[tuple[str, Any]] = []
    for kind in _MATCHER_TESTS:
        if kind not in value:
            continue
        expected = value[kind]
        if kind in ("exists", "nonempty") and not isinstance(expected, bool):
            raise UsageError(f"{at}.{kind}: must be true or false (got {_kind(expected)})")
        _require_json(expected, f"{at}.{kind}")
        tests.append((kind, expected))
    if not tests:
        raise UsageError(f"{at}: give a test beside the pointer: {', '.join(_MATCHER_TESTS)}")
    return Matcher(pointer, tokens, tuple(tests))


def _idempotency(value: Any, at: str) -> Idempotency:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in ("argument", "header"):
        raise UsageError(f'{at}: must be {{ argument = "NAME" }} or {{ header = "NAME" }} (exactly one)')
    [(kind, target)] = value.items()
    if not isinstance(target, str) or not target:
        raise UsageError(f"{at}.{kind}: must be a non-empty string (got {_toml_value(target)})")
    if kind == "header":
        if not _HEADER_TOKEN.fullmatch(target):
            raise UsageError(f"{at}.header: {target!r} is not an HTTP header name")
        return Idempotency(header=target)
    return Idempotency(argument=target)


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


def _require_json(value: Any, at: str) -> None:
    """TOML dates and times have no JSON form, so a matcher cannot compare with them."""
    if isinstance(value, dict):
        for key, item in value.items():
            _require_json(item, f"{at}.{key}")
    elif isinstance(value, list):
        for item in value:
            _require_json(item, at)
    elif isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{at}: {value} has no JSON form")
    elif not isinstance(value, str | int | float | bool):
        raise UsageError(f"{at}: a {_kind(value)} has no JSON form; write it as a string")


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _quote(key: str) -> str:
    """A TOML key as it is written in a table header: bare when it can be, quoted otherwise."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)
