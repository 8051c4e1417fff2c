"""Reviewed profiles: for the MCP servers people install most, the tables `checkpoint init` writes, decided by a
person who read the server's tools rather than guessed from its hints; shipped as data, one TOML file a server.

A profile (``<name>.toml`` beside this module) holds:

- ``[profile]``: ``title`` (the package, as people install it), ``reviewed`` (the version whose ``tools/list``
  was read; ``tools/servers`` and the ``dev`` extra pin that version, and a test fails when its tools change),
  ``server_names`` (the ``serverInfo.name`` values it answers ``initialize`` with) and ``recognise_by`` (tool
  names it must list). A server is recognised by both: its name, and those tools.
- ``[tools.NAME]``, one per tool of the reviewed version: ``hints`` (the four MCP hints as that version gives
  them, ``{}`` for none), ``why`` (the comment `init` writes above the table: every table says why), the policy
  keys to write (``journal``, ``idempotent``, ``repeat``, ``window``, ``within_session``, ``match``, ``ignore``),
  ``offer_approve`` (write ``# approve = "operator"`` commented out: what a user may want gated instead), and
  ``caught_commands`` (JSON pointers to the shell command a tool runs: `init` writes the families of commands that
  act beyond the machine as its sub-rules, ``beyond_the_machine``, refused from a later session).

A profile's table is used for a tool only while the tool carries the hints it was reviewed with; a tool it does
not name, or one whose hints changed, gets its table from its own hints (``proposals``). The user's edits always
win: `init` never rewrites a policy file that exists. This room reads only its own files (``importlib.resources``);
it imports ``errors``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from checkpoint_mcp.errors import ProfileError

HINTS: Final = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_KEYS: Final = ("journal", "idempotent", "repeat", "window", "within_session", "match", "ignore")
"""The policy keys a profile may set, in the order they are written."""
_CHOICES: Final = {
    "repeat": ("allow", "replay", "refuse", "confirm"),
    "within_session": ("run", "catch"),
}


@dataclass(frozen=True)
class ReviewedTable:
    """One tool's table in a profile."""

    hints: Mapping[str, Any]
    """The hints the tool carried when it was reviewed."""
    why: str
    settings: Mapping[str, bool | str | tuple[str, ...]]
    """The policy keys to write, in ``_KEYS`` order."""
    offers_approve: bool
    caught_commands: tuple[str, ...] = ()
    """Where the tool's shell command is (JSON pointers): the commands that act beyond the machine are its
    sub-rules."""

    def keys(self) -> tuple[str, ...]:
        """The table's lines as `init` writes them (``key = value``)."""
        return tuple(f"{key} = {_toml(value)}" for key, value in self.settings.items())


@dataclass(frozen=True)
class Profile:
    """A reviewed profile of one server."""

    name: str
    """The file's stem (``playwright``)."""
    title: str
    reviewed: str
    server_names: tuple[str, ...]
    recognise_by: tuple[str, ...]
    tables: Mapping[str, ReviewedTable]

    def recognises(self, server_info: Mapping[str, Any], tool_names: Sequence[str]) -> bool:
        """Whether a server that answered ``initialize`` with ``server_info`` and lists ``tool_names`` is this
        profile's server: its ``serverInfo.name``, and every tool of ``recognise_by``."""
        listed = set(tool_names)
        return server_info.get("name") in self.server_names and all(tool in listed for tool in self.recognise_by)


@cache
def profiles() -> tuple[Profile, ...]:
    """Every profile shipped with the package, by file name.

    Raises:
        ProfileError: a profile file cannot be read or holds a key, type or value a profile may not have.
    """
    found = []
    for entry in sorted(resources.files(__name__).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            found.append(load(entry.name[: -len(".toml")], entry.read_text(encoding="utf-8")))
    return tuple(found)


def recognise(server_info: Mapping[str, Any], tool_names: Sequence[str]) -> Profile | None:
    """The profile of the server that answered with ``server_info`` and lists ``tool_names``, or None.

    Raises:
        ProfileError: a profile file cannot be read (see ``profiles``).
    """
    return next((profile for profile in profiles() if profile.recognises(server_info, tool_names)), None)


def load(name: str, text: str) -> Profile:
    """The profile ``name`` whose file holds ``text``, checked.

    Raises:
        ProfileError: the text is not TOML, or holds a key, type or value a profile may not have.
    """
    path = f"init/profiles/{name}.toml"
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(path, "the file", f"is not valid TOML ({exc})") from exc
    _only(document, ("profile", "tools"), path, "the file")
    head = _table(document, "profile", path, "the file")
    _only(head, ("title", "reviewed", "server_names", "recognise_by"), path, "[profile]")
    tools = _table(document, "tools", path, "the file")
    tables = {tool: _reviewed(table, path, f"[tools.{tool}]") for tool, table in tools.items()}
    recognise_by = _strings(head, "recognise_by", path, "[profile]")
    unknown = [tool for tool in recognise_by if tool not in tables]
    if unknown:
        raise ProfileError(path, "[profile] recognise_by", f"names tools the profile has no table for: {unknown}")
    return Profile(
        name=name,
        title=_string(head, "title", path, "[profile]"),
        reviewed=_string(head, "reviewed", path, "[profile]"),
        server_names=_strings(head, "server_names", path, "[profile]"),
        recognise_by=recognise_by,
        tables=tables,
    )


def _reviewed(table: Any, path: str, where: str) -> ReviewedTable:
    if not isinstance(table, dict):
        raise ProfileError(path, where, "must be a table")
    _only(table, ("hints", "why", "offer_approve", "caught_commands", *_KEYS), path, where)
    hints = _table(table, "hints", path, where)
    for hint, value in hints.items():
        if hint not in HINTS or not isinstance(value, bool):
            raise ProfileError(path, f"{where} hints", f"{hint} = {value!r}: a hint is one of {HINTS}, true or false")
    settings: dict[str, bool | str | tuple[str, ...]] = {}
    for key in _KEYS:
        if key not in table:
            continue
        value = table[key]
        if key in ("match", "ignore"):
            value = _pointers(table, key, path, where)
        elif key in ("journal", "idempotent") and not isinstance(value, bool):
            raise ProfileError(path, f"{where} {key}", "must be true or false")
        if key in _CHOICES and value not in _CHOICES[key]:
            raise ProfileError(path, f"{where} {key}", f"must be one of {_CHOICES[key]}")
        if key == "window" and not isinstance(value, str):
            raise ProfileError(path, f"{where} {key}", 'must be a duration string ("24h")')
        settings[key] = value
    if settings.get("journal") is not False and settings.get("idempotent") is not True and "repeat" not in settings:
        # Else the table would take [default]'s repeat, which the profile's reader never sees.
        raise ProfileError(path, where, "sets none of journal = false, idempotent = true, repeat: say what it is")
    offer = table.get("offer_approve", False)
    if not isinstance(offer, bool):
        raise ProfileError(path, f"{where} offer_approve", "must be true or false")
    why = _string(table, "why", path, where)
    caught = _pointers(table, "caught_commands", path, where) if "caught_commands" in table else ()
    return ReviewedTable(hints=dict(hints), why=why, settings=settings, offers_approve=offer, caught_commands=caught)


def _pointers(table: Mapping[str, Any], key: str, path: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(p, str) and p.startswith("/") for p in value):
        raise ProfileError(path, f"{where} {key}", 'must be a non-empty array of JSON pointers ("/command")')
    return tuple(value)


def _only(table: Mapping[str, Any], allowed: Sequence[str], path: str, where: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ProfileError(path, where, f"unknown key {unknown[0]!r} (a profile has {', '.join(allowed)})")


def _table(table: Mapping[str, Any], key: str, path: str, where: str) -> dict[str, Any]:
    value = table.get(key)
    if not isinstance(value, dict):
        raise ProfileError(path, f"{where} {key}", "must be a table")
    return value


def _string(table: Mapping[str, Any], key: str, path: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise ProfileError(path, f"{where} {key}", "must be a non-empty string on one line")
    return value


def _strings(table: Mapping[str, Any], key: str, path: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item for item in value):
        raise ProfileError(path, f"{where} {key}", "must be a non-empty array of strings")
    return tuple(value)


def _toml(value: bool | str | tuple[str, ...]) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
