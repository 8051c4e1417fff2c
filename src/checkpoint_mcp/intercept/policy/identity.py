"""A call's identity for repeats: the part of its arguments a tool policy says makes two calls the same call.

Without a rule a repeat is the same tool with the same arguments (the call's signature, ``signature.py``). A model
resumed after a context reset rarely re-sends byte-identical arguments, though: it rewords the body, the greeting,
a timestamp. A tool's table may therefore name what counts::

    [tools.send_email]
    repeat = "refuse"
    match = ["/to", "/subject"]        # only these values count (JSON pointers, RFC 6901)
    # ignore = ["/body", "/sent_at"]   # or: everything but these (exactly one of match and ignore)
    normalize = ["trim", "space", "case"]  # string values: strip, collapse white space, case-fold

A pointer a call lacks counts as absent: two calls that both lack it agree there, one with it and one without do
not (an absent value is not JSON ``null``). The identity is the hex SHA-256 of the RFC 8785 canonical JSON of
``{"name": tool, "match": {pointer: value}}`` (or ``{"name": tool, "ignore": rest}``), so it never equals a
signature (``{"name", "arguments"}``) and two tools never share one. Pure; no I/O.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy.pointer import MISSING, PointerError, parse_pointer, resolve
from checkpoint_mcp.signature import canonical_json

NORMALIZATIONS: Final = ("trim", "space", "case")
"""What ``normalize`` may name, applied in this order to every string value that counts."""

IDENTITY_KEYS: Final = frozenset({"match", "ignore", "normalize"})
_SPACE: Final = re.compile(r"\s+")


@dataclass(frozen=True)
class IdentityRule:
    """Which part of a call's arguments is its identity for repeats: ``match`` (only these pointers) or
    ``ignore`` (all but these), and how string values are normalised before they are compared."""

    mode: str  # "match" or "ignore"
    pointers: tuple[str, ...]
    normalize: tuple[str, ...] = ()
    tokens: tuple[tuple[str, ...], ...] = field(default=(), repr=False, compare=False)

    def of(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """The identity of a call of ``tool`` with ``arguments``: a hex SHA-256, like a signature."""
        if self.mode == "match":
            kept: Any = {}
            for pointer, tokens in zip(self.pointers, self.tokens, strict=True):
                value = resolve(arguments, tokens)
                if value is not MISSING:
                    kept[pointer] = value
        else:
            kept = copy.deepcopy(dict(arguments))
            for tokens in self.tokens:
                _remove(kept, tokens)
        if self.normalize:
            kept = _normalized(kept, self.normalize)
        return hashlib.sha256(canonical_json({"name": tool, self.mode: kept})).hexdigest()

    def describe(self) -> str:
        """The rule as the operator wrote it, e.g. ``match /to, /subject (normalize trim, case)``."""
        text = f"{self.mode} {', '.join(self.pointers)}"
        return f"{text} (normalize {', '.join(self.normalize)})" if self.normalize else text


def parse_identity(keys: Mapping[str, Any], at: str) -> IdentityRule | None:
    """The identity rule of one policy table from its ``match``, ``ignore`` and ``normalize`` keys, if any;
    ``at`` names the file and the table (``policy.toml: [tools.send_email]``).

    Raises:
        UsageError: both ``match`` and ``ignore``, ``normalize`` without either, or a value that is not a list of
            JSON pointers (or of known normalisations); the message names the file, the table and the key.
    """
    given = [mode for mode in ("match", "ignore") if mode in keys]
    if len(given) == 2:
        raise UsageError(
            f"{at} match, ignore: give one of the two (match: only these pointers count; ignore: all but these)"
        )
    if not given:
        if "normalize" in keys:
            raise UsageError(f"{at} normalize: applies to the values match or ignore keep; give one of them")
        return None
    [mode] = given
    pointers = _strings(keys[mode], f"{at} {mode}", 'a list of JSON pointers such as ["/to", "/subject"]')
    if not pointers:
        raise UsageError(f'{at} {mode}: name at least one JSON pointer such as "/to"')
    tokens: list[tuple[str, ...]] = []
    for pointer in pointers:
        try:
            parsed = parse_pointer(pointer)
        except PointerError as exc:
            raise UsageError(f"{at} {mode}: {exc}") from exc
        if not parsed:
            raise UsageError(f'{at} {mode}: "" is the whole of the arguments; name a member such as "/to"')
        tokens.append(parsed)
    if len(set(pointers)) != len(pointers):
        raise UsageError(f"{at} {mode}: names a pointer twice")
    normalize = _strings(keys.get("normalize", []), f"{at} normalize", f"a list of {', '.join(NORMALIZATIONS)}")
    for name in normalize:
        if name not in NORMALIZATIONS:
            raise UsageError(f"{at} normalize: unknown {name!r}; one of {', '.join(NORMALIZATIONS)}")
    ordered = tuple(name for name in NORMALIZATIONS if name in normalize)
    return IdentityRule(mode, tuple(pointers), ordered, tuple(tokens))


def _strings(value: Any, at: str, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UsageError(f"{at}: must be {what}")
    return list(value)


def _remove(document: Any, tokens: tuple[str, ...]) -> None:
    """Take the value at ``tokens`` out of ``document`` (in place), if it is there."""
    parent = resolve(document, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent) and str(int(last)) == last:
        del parent[int(last)]


def _normalized(value: Any, how: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        if "space" in how:
            value = _SPACE.sub(" ", value)
        if "trim" in how:
            value = value.strip()
        if "case" in how:
            value = value.casefold()
        return value
    if isinstance(value, dict):
        return {key: _normalized(item, how) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalized(item, how) for item in value]
    return value
