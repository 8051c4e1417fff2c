"""What a tool policy file says about in-doubt calls, as the brief reads it: which tools settle themselves.

A call in doubt (in flight when its proxy died) of a tool whose ``[tools.NAME]`` table declares a ``probe``, an
``idempotency`` key or ``idempotent = true`` is settled by the proxy when the call comes again (docs/policies.md):
the probe says whether it happened, the call is sent again under the same key, or it is sent again as is on the
server's promise that a repeat changes nothing more. For such a call the resumed agent is told that sending it
again is safe, not to wait for an operator.

The proxy reads the file with ``intercept.policy``, which the session may not import (it only reads the journal),
so this module reads the little it needs with ``tomllib``. The winning table for a tool is chosen as the proxy
chooses it: an exact name over every glob; among matching globs, the one with more literal characters, then fewer
wildcards, then the one written first. The proxy refused a bad file at its start, so a file that cannot be read
here is only a warning, and its in-doubt calls are shown as needing an operator: the safe reading.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

PROBE: Final = "probe"
KEY: Final = "idempotency key"
IDEMPOTENT: Final = "idempotent"


@dataclass(frozen=True)
class _Table:
    pattern: str
    literals: int
    wildcards: int
    settles: str | None
    """``probe <tool>``, ``idempotency key``, ``idempotent``, or None when the table declares none of them."""


@dataclass(frozen=True)
class Settlers:
    """The tool tables of one policy file, in the order they were written."""

    tables: tuple[_Table, ...]

    def how(self, tool: str) -> str | None:
        """How an in-doubt call of ``tool`` settles itself (``probe <tool>``, ``idempotency key``,
        ``idempotent``), or None."""
        exact = [t for t in self.tables if t.wildcards == 0 and t.pattern == tool]
        if exact:
            return exact[0].settles
        globs = [t for t in self.tables if t.wildcards and fnmatch.fnmatchcase(tool, t.pattern)]
        if not globs:
            return None
        # min() keeps the first of equals: the table written first wins a tie, as in the proxy.
        return min(globs, key=lambda t: (-t.literals, t.wildcards)).settles


def read(path: str) -> Settlers | str:
    """The settling tables of the policy file at ``path``, or what is wrong with the file."""
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return f"{path} is not valid TOML ({exc})"
    tools = document.get("tools", {})
    if not isinstance(tools, dict):
        return f"{path}: [tools] is not a table"
    tables = []
    for pattern, table in tools.items():
        if isinstance(table, dict):
            literals, wildcards = _counts(pattern)
            tables.append(_Table(pattern, literals, wildcards, _settles(table)))
    return Settlers(tuple(tables))


def _settles(table: Mapping[str, Any]) -> str | None:
    probe = table.get("probe")
    if isinstance(probe, dict) and isinstance(probe.get("tool"), str):
        return f"{PROBE} {probe['tool']}"
    if isinstance(table.get("idempotency"), dict):
        return KEY
    if table.get("idempotent") is True:
        return IDEMPOTENT
    return None


def _counts(pattern: str) -> tuple[int, int]:
    """Literal characters and wildcards (``*``, ``?``, one ``[set]``) of a glob, as the proxy counts them."""
    literals = wildcards = index = 0
    while index < len(pattern):
        char = pattern[index]
        if char in "*?":
            wildcards += 1
        elif char == "[" and pattern.find("]", index + 1) > index + 1:
            wildcards += 1
            index = pattern.find("]", index + 1)
        else:
            literals += 1
        index += 1
    return literals, wildcards
