"""Reading a policy file: the TOML grammar of every key, checked once, into the frozen rules of ``rules.py``.

The file's shape (docs/policies.md documents every key)::

    [default]                      # tools no rule names
    repeat = "refuse"              # allow | replay | refuse | confirm: a call repeating a journaled one by content
    window = "24h"                 # how far back a repeat is looked for
    within_session = "run"         # a repeat within one unbroken session runs (default "catch": the rule applies)

    [tools.send_email]             # an exact tool name
    repeat = "replay"              # or "confirm": refused once, runs when sent again within confirm_within
    match = ["/to", "/subject"]    # the call's identity for repeats (or ignore = [...]; identity.py)
    limit = { calls = 3, per = "1h" }                     # at most 3 calls run per rolling hour (scope below)
    [tools.send_email.probe]       # a read-only tool that says whether an in-doubt call landed
    tool = "list_outbox"
    arguments = { to = "/to", subject = "/subject" }      # JSON pointers into the in-doubt call's arguments
    happened_if = { pointer = "/count", equals = 1 }      # tested on the probe result's structuredContent
    not_happened_if = { pointer = "/count", equals = 0 }

    [tools.charge_card]
    idempotency = { argument = "idempotency_key" }        # or { header = "Idempotency-Key" } (--upstream-url)
    budget = { sum = "/amount", max = 100, per = "24h", scope = "journal" }   # the amounts of the calls that ran

    [tools."read_*"]               # a glob: * ? [abc] [!abc]
    journal = false

    [tools.set_status]
    idempotent = true              # the server's promise: a repeat runs, an in-doubt call is re-sent as is

    [tools.delete_repo]
    approve = "operator"           # or "elicit": each call waits for a person's approval of its exact arguments
    approval_expires = "1h"        # how long a granted approval stays usable (once)

    [tools.start_process]          # sub-rules chosen by an argument: the first that matches decides
    repeat = "allow"               # a command no sub-rule names: the tool's own keys
    [[tools.start_process.when]]
    name = "push"                  # named in errors, in `policy check` and in the journal (calls.rule)
    pointer = "/command"           # the argument tested (or an array of pointers: any of them)
    prefixes = ["git push"]        # or regex = '…' (argument_match.py)
    repeat = "refuse"              # and window, within_session, confirm_within, approve, approval_expires, limit,
    within_session = "run"         # budget: over the tool's own keys

``match``, ``ignore``, ``normalize``, ``budget`` and ``when`` belong to one tool's table: pointers name one tool's
arguments.
Everything is checked here, once, so the hot path never re-checks: an unknown table or key, a wrong type, a bad
glob, duration, pointer, matcher, limit or budget is a ``UsageError`` naming the file, the table and the key.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from checkpoint_mcp.clock import parse_duration
from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy.argument_match import MATCH_KEYS, parse_match
from checkpoint_mcp.intercept.policy.identity import IDENTITY_KEYS, parse_identity
from checkpoint_mcp.intercept.policy.pointer import PointerError, parse_pointer
from checkpoint_mcp.intercept.policy.rules import (
    DEFAULT_APPROVAL_EXPIRES,
    DEFAULT_CONFIRM_WITHIN,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_WINDOW,
    MATCHER_TESTS,
    Approve,
    Budget,
    Idempotency,
    Limit,
    Matcher,
    Pattern,
    Policy,
    Probe,
    Repeat,
    Scope,
    SubRule,
    ToolRule,
    WithinSession,
    kind_of,
    table_key,
    toml_value,
)

_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_RULE_KEYS: Final = frozenset(
    {"journal", "repeat", "window", "probe", "idempotency", "read_only", "idempotent", "confirm_within", "approve"}
    | {"approval_expires", "within_session", "limit", "budget", "when", *IDENTITY_KEYS}
)
_SUB_RULE_KEYS: Final = frozenset(
    {"name", *MATCH_KEYS, "repeat", "window", "within_session", "confirm_within", "approve", "approval_expires"}
    | {"limit", "budget"}
)
_SUB_RULE_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_LIMIT_KEYS: Final = ("calls", "per", "scope")
_BUDGET_KEYS: Final = ("sum", "max", "per", "scope")
_PROBE_KEYS: Final = frozenset({"tool", "arguments", "happened_if", "not_happened_if", "timeout", "settle_after"})


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
    for key in ("probe", "idempotency", "read_only", "idempotent", "budget", "when", *sorted(IDENTITY_KEYS)):
        if key in default_keys:
            raise UsageError(f"{name}: [default] {key}: belongs to one tool; put it under [tools.NAME]")
    default = _build_rule({}, default_keys, "default")
    tools = document.get("tools", {})
    if not isinstance(tools, dict):
        raise UsageError(f"{name}: tools: must be tables, [tools.NAME] (got {kind_of(tools)})")
    exact: dict[str, ToolRule] = {}
    globs: list[Pattern] = []
    for order, (pattern_text, table) in enumerate(tools.items()):
        where = f"tools.{table_key(pattern_text)}"
        keys = _rule_keys(table, name, where)
        pattern = _compile_pattern(pattern_text, name, where, order, keys)
        if pattern.regex is None:
            exact[pattern_text] = _tool_rule(default_keys, keys, name, where)
        else:
            globs.append(pattern)
    globs.sort(key=lambda p: (-p.literals, p.wildcards, p.order))
    return Policy(
        path=name,
        default=default,
        exact=MappingProxyType(exact),
        globs=tuple((p, _tool_rule(default_keys, p.keys, name, f"tools.{table_key(p.text)}")) for p in globs),
    )


def _tool_rule(defaults: Mapping[str, Any], keys: Mapping[str, Any], name: str, where: str) -> ToolRule:
    """A ``[tools.NAME]`` table's rule, with its sub-rules (``when``) checked and built."""
    own = {key: value for key, value in keys.items() if key != "when"}
    rule = _build_rule(defaults, own, where)
    if "when" not in keys:
        return rule
    return replace(rule, when=_sub_rules(keys["when"], defaults, own, name, where))


def _sub_rules(
    value: Any, defaults: Mapping[str, Any], tool_keys: Mapping[str, Any], name: str, where: str
) -> tuple[SubRule, ...]:
    """``[[tools.NAME.when]]``: each sub-rule's test and its rule (its keys over the tool's), in the order written.

    Raises:
        UsageError: not an array of tables; a sub-rule without a name, with a name used twice, with an unknown
            key, a bad test, or a key that conflicts with the tool's table.
    """
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        raise UsageError(f"{name}: [{where}] when: must be sub-rules: one or more [[{where}.when]] tables")
    subs: list[SubRule] = []
    for index, table in enumerate(value, start=1):
        label = table.get("name")
        if not isinstance(label, str) or not _SUB_RULE_NAME.fullmatch(label):
            raise UsageError(
                f"{name}: [[{where}.when]] number {index}: name: each sub-rule needs a name of letters, digits, - "
                f"and _ (got {toml_value(label) if label is not None else 'none'})"
            )
        at = f"{where}.when.{label}"
        if any(sub.name == label for sub in subs):
            raise UsageError(f"{name}: [{at}] name: two sub-rules of [{where}] are named {label!r}")
        for key in table:
            if key not in _SUB_RULE_KEYS:
                known = ", ".join(sorted(_SUB_RULE_KEYS))
                raise UsageError(f"{name}: [{at}] {key}: unknown key; a sub-rule has {known}")
        keys = {key: _rule_value(key, table[key], name, at) for key in table if key in _RULE_KEYS}
        _check_sub_rule(keys, tool_keys, name, at)
        match = parse_match(table, f"{name}: [{at}]")
        for key in ("limit", "budget"):  # its own: counted apart from the tool's other calls
            if key in keys:
                keys[key] = replace(keys[key], part=label)
        subs.append(SubRule(label, match, _build_rule(defaults, {**tool_keys, **keys}, at)))
    return tuple(subs)


def _check_sub_rule(keys: Mapping[str, Any], tool_keys: Mapping[str, Any], name: str, at: str) -> None:
    """A sub-rule's keys against each other and against its tool's table."""
    repeat = keys.get("repeat")
    if tool_keys.get("idempotent") is True and repeat is not None and repeat is not Repeat.ALLOW:
        raise UsageError(
            f"{name}: [{at}] repeat: conflicts with the tool's idempotent = true (a repeat of an idempotent tool "
            "runs); remove one of the two"
        )
    confirms = keys.get("repeat", tool_keys.get("repeat")) is Repeat.CONFIRM
    if "confirm_within" in keys and not confirms:
        raise UsageError(f'{name}: [{at}] confirm_within: applies to repeat = "confirm" only; remove it')
    if "approval_expires" in keys and "approve" not in keys and "approve" not in tool_keys:
        raise UsageError(f'{name}: [{at}] approval_expires: applies with approve = "operator" or "elicit" only')


def _rule_keys(table: Any, name: str, where: str) -> dict[str, Any]:
    """The table's keys, each checked and converted; only the keys it gives."""
    if not isinstance(table, dict):
        raise UsageError(f"{name}: [{where}] must be a table (got {kind_of(table)})")
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
            "limit",
            "budget",
            "when",
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
    if key == "probe":
        return _probe(value, name, f"{where}.probe")
    if key in IDENTITY_KEYS or key == "when":
        return value  # checked as a whole: by parse_identity (match and ignore exclude each other), by _sub_rules
    return _READERS[key](value, at)


def _boolean(value: Any, at: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{at}: must be true or false (got {kind_of(value)})")
    return value


def _choice(kind: type[StrEnum]) -> Callable[[Any, str], StrEnum]:
    def read(value: Any, at: str) -> StrEnum:
        if value not in tuple(kind):
            choices = ", ".join(f'"{choice}"' for choice in kind)
            raise UsageError(f"{at}: must be one of {choices} (got {toml_value(value)})")
        return kind(value)

    return read


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
        repeats_run=idempotent or merged.get("repeat") is Repeat.ALLOW,
        limit=merged.get("limit"),
        budget=keys.get("budget"),
        source=source,
    )


def _compile_pattern(text: str, name: str, where: str, order: int, keys: Mapping[str, Any]) -> Pattern:
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
    return Pattern(text, regex, wildcards, literals, order, keys)


def _probe(value: Any, name: str, where: str) -> Probe:
    if not isinstance(value, dict):
        raise UsageError(f"{name}: [{where}] must be a table (got {kind_of(value)})")
    for key in value:
        if key not in _PROBE_KEYS:
            raise UsageError(f"{name}: [{where}] {key}: unknown key; a probe has {', '.join(sorted(_PROBE_KEYS))}")
    tool = value.get("tool")
    if not isinstance(tool, str) or not tool or any(c in tool for c in "*?["):
        raise UsageError(f"{name}: [{where}] tool: must name one tool exactly (got {toml_value(tool)})")
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        raise UsageError(f'{name}: [{where}] arguments: must be a table of name = "/json/pointer"')
    for argument, pointer in arguments.items():
        at = f"{name}: [{where}] arguments.{table_key(argument)}"
        if not isinstance(pointer, str):
            raise UsageError(f'{at}: must be a JSON pointer string such as "/to" (got {kind_of(pointer)})')
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


def _limit(value: Any, at: str) -> Limit:
    """``{ calls = N, per = DURATION, scope = "workflow" | "journal" }``."""
    table = _inline_table(value, at, '{ calls = 3, per = "1h" }', _LIMIT_KEYS)
    calls = table.get("calls")
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 1:
        raise UsageError(f"{at}.calls: must be a whole number of calls, 1 or more (got {toml_value(calls)})")
    return Limit(calls, _per(table, at), _scope(table, at))


def _budget(value: Any, at: str) -> Budget:
    """``{ sum = "/pointer", max = NUMBER, per = DURATION, scope = "workflow" | "journal" }``."""
    table = _inline_table(value, at, '{ sum = "/amount", max = 100, per = "24h" }', _BUDGET_KEYS)
    pointer = table.get("sum")
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise UsageError(
            f'{at}.sum: must be a JSON pointer to a number in the arguments, such as "/amount" '
            f"(got {toml_value(pointer)})"
        )
    try:
        tokens = parse_pointer(pointer)
    except PointerError as exc:
        raise UsageError(f"{at}.sum: {exc}") from exc
    most = table.get("max")
    if isinstance(most, bool) or not isinstance(most, int | float) or not math.isfinite(most) or most < 0:
        raise UsageError(f"{at}.max: must be a number, 0 or more (got {toml_value(most)})")
    return Budget(pointer, tokens, float(most), _per(table, at), _scope(table, at))


def _inline_table(value: Any, at: str, example: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{at}: must be a table such as {example} (got {kind_of(value)})")
    for key in value:
        if key not in keys:
            raise UsageError(f"{at}.{key}: unknown key; it has {', '.join(keys)}")
    return value


def _per(table: Mapping[str, Any], at: str) -> float:
    if "per" not in table:
        raise UsageError(f'{at}.per: the window is required, a duration such as "1h" or "24h"')
    return parse_duration(table["per"], f"{at}.per")


def _scope(table: Mapping[str, Any], at: str) -> Scope:
    scope = table.get("scope", Scope.WORKFLOW.value)
    if scope not in tuple(Scope):
        choices = ", ".join(f'"{choice}"' for choice in Scope)
        raise UsageError(f"{at}.scope: must be one of {choices} (got {toml_value(scope)})")
    return Scope(scope)


def _matcher(value: Any, at: str) -> Matcher | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f'{at}: must be a table such as {{ pointer = "/count", equals = 1 }} (got {kind_of(value)})')
    for key in value:
        if key != "pointer" and key not in MATCHER_TESTS:
            raise UsageError(f"{at}.{key}: unknown key; a matcher has pointer and {', '.join(MATCHER_TESTS)}")
    pointer = value.get("pointer")
    if not isinstance(pointer, str):
        raise UsageError(f'{at}.pointer: a JSON pointer string into structuredContent is required, e.g. "/count"')
    try:
        tokens = parse_pointer(pointer)
    except PointerError as exc:
        raise UsageError(f"{at}.pointer: {exc}") from exc
    tests: list[tuple[str, Any]] = []
    for kind in MATCHER_TESTS:
        if kind not in value:
            continue
        expected = value[kind]
        if kind in ("exists", "nonempty") and not isinstance(expected, bool):
            raise UsageError(f"{at}.{kind}: must be true or false (got {kind_of(expected)})")
        _require_json(expected, f"{at}.{kind}")
        tests.append((kind, expected))
    if not tests:
        raise UsageError(f"{at}: give a test beside the pointer: {', '.join(MATCHER_TESTS)}")
    return Matcher(pointer, tokens, tuple(tests))


def _idempotency(value: Any, at: str) -> Idempotency:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in ("argument", "header"):
        raise UsageError(f'{at}: must be {{ argument = "NAME" }} or {{ header = "NAME" }} (exactly one)')
    [(kind, target)] = value.items()
    if not isinstance(target, str) or not target:
        raise UsageError(f"{at}.{kind}: must be a non-empty string (got {toml_value(target)})")
    if kind == "header":
        if not _HEADER_TOKEN.fullmatch(target):
            raise UsageError(f"{at}.header: {target!r} is not an HTTP header name")
        return Idempotency(header=target)
    return Idempotency(argument=target)


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
        raise UsageError(f"{at}: a {kind_of(value)} has no JSON form; write it as a string")


_READERS: Final[dict[str, Callable[[Any, str], Any]]] = {
    "journal": _boolean,
    "read_only": _boolean,
    "idempotent": _boolean,
    "repeat": _choice(Repeat),
    "approve": _choice(Approve),
    "within_session": _choice(WithinSession),
    "window": parse_duration,
    "confirm_within": parse_duration,
    "approval_expires": parse_duration,
    "idempotency": _idempotency,
    "limit": _limit,
    "budget": _budget,
}
"""How each key of a rule's table is read and checked (``probe`` and the identity keys apart)."""
