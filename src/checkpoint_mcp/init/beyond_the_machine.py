"""Shell commands that act beyond this machine: the families `init` writes as sub-rules of a tool that runs shell
commands, so that such a command sent again from a later session is refused while every other command repeats.

The families are data (``beyond_the_machine.toml``, which says how to extend them), read once and checked for
shape here; what each prefix and regular expression means is the proxy's (``intercept.policy.argument_match``),
which checks them again when it reads the file `init` wrote. A tool gets them when a reviewed profile says where
its command is (``caught_commands``), or when `init` guesses from its name and arguments that it runs shell
commands (``shell_argument``). This room reads only its own file; it imports ``errors`` and ``read_names``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from checkpoint_mcp.errors import ProfileError
from checkpoint_mcp.init.read_names import words

FILE: Final = "beyond_the_machine.toml"
FAMILIES: Final = ("push", "publish", "deploy", "network-write", "messages", "database-write")
"""The kinds of effect the entries belong to (the issue's list), each with its test."""
SHELL_WORDS: Final = frozenset({"run", "exec", "execute", "shell", "terminal", "process", "bash", "cmd", "powershell"})
"""A word of a tool's name that says it runs something (``run_command``, ``shell_execute``, ``start_process``)."""
SHELL_ARGUMENTS: Final = ("command", "cmd", "script", "command_line", "commandLine")
"""The names of the argument that holds the shell command, in the order they are looked for."""


@dataclass(frozen=True)
class Family:
    """One entry: written as one sub-rule, ``prefixes`` or ``regex``."""

    name: str
    family: str
    why: str
    prefixes: tuple[str, ...] = ()
    regex: str | None = None


@cache
def families() -> tuple[Family, ...]:
    """Every entry, in the order written (the order the sub-rules are written in).

    Raises:
        ProfileError: the file cannot be read, or an entry lacks a key or has one a family may not have.
    """
    path = f"init/{FILE}"
    try:
        document = tomllib.loads(resources.files(__package__ or "").joinpath(FILE).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(path, "the file", f"is not valid TOML ({exc})") from exc
    entries = document.get("family")
    if set(document) != {"family"} or not isinstance(entries, list) or not entries:
        raise ProfileError(path, "the file", "must hold [[family]] tables only")
    found = [_family(entry, path, number) for number, entry in enumerate(entries, start=1)]
    names = [family.name for family in found]
    if len(set(names)) != len(names):
        raise ProfileError(path, "[[family]] name", f"each name once: {names}")
    return tuple(found)


def _family(entry: Any, path: str, number: int) -> Family:
    where = f"[[family]] number {number}"
    if not isinstance(entry, dict) or set(entry) - {"name", "family", "why", "prefixes", "regex"}:
        raise ProfileError(path, where, "a family has name, family, why, and prefixes or regex")
    texts = {key: entry.get(key) for key in ("name", "family", "why")}
    if not all(isinstance(text, str) and text.strip() for text in texts.values()):
        raise ProfileError(path, where, "name, family and why are non-empty strings")
    if entry["family"] not in FAMILIES:
        raise ProfileError(path, f"{where} family", f"must be one of {FAMILIES}")
    prefixes, regex = entry.get("prefixes"), entry.get("regex")
    if (prefixes is None) == (regex is None):
        raise ProfileError(path, where, "give exactly one of prefixes and regex")
    if prefixes is not None and not (isinstance(prefixes, list) and prefixes and all(map(_is_text, prefixes))):
        raise ProfileError(path, f"{where} prefixes", "must be a non-empty array of strings")
    if regex is not None and not (isinstance(regex, str) and regex):
        raise ProfileError(path, f"{where} regex", "must be a non-empty string")
    return Family(entry["name"], entry["family"], entry["why"], tuple(prefixes or ()), regex)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def shell_argument(name: str, tool: Mapping[str, Any]) -> str | None:
    """The argument of a tool that looks like it runs shell commands, as a JSON pointer (``/command``), or None: a
    name with a word of ``SHELL_WORDS`` and a string (or array of strings) argument named in ``SHELL_ARGUMENTS``."""
    if not SHELL_WORDS.intersection(words(name)):
        return None
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    for argument in SHELL_ARGUMENTS:
        declared = properties.get(argument)
        if isinstance(declared, Mapping) and _text(declared):
            return f"/{argument}"
    return None


def _text(declared: Mapping[str, Any]) -> bool:
    """Whether an argument's schema says a string, an array of strings, or nothing of its type."""
    kind = declared.get("type")
    if kind is None or kind == "string":
        return True
    items = declared.get("items")
    return kind == "array" and isinstance(items, Mapping) and items.get("type") == "string"
