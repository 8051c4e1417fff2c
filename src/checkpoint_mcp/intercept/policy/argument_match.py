"""What a sub-rule of a tool's table tests in a call's arguments: the value at a JSON pointer (or at any of a few),
against command prefixes or a regular expression. Checked once at start, tested once per call
(``ToolRule.chosen``). Pure; no I/O.

::

    [[tools.start_process.when]]
    name = "push"
    pointer = "/command"                       # or ["/command", "/stdin"]: the value at any of them
    prefixes = ["git push", "docker push"]     # or regex = '…' (Python's re, searched anywhere in the value)

**Prefixes**, in the style of Claude Code's ``Bash(git push:*)``, are words of a command, white space between them
normalised. One matches a command line when one of the commands the line runs (``command_line``: the commands
chained with ``&&``, ``;`` or ``|``, those behind ``sudo``, ``env X=1``, ``npx``, ``sh -c '…'`` …) is its program
(named as its last path part: ``/usr/bin/git`` is ``git``) followed by the prefix's other words in order, with
only options and their values between them: ``git push`` matches ``git -C repo push --tags`` and ``npm test &&
git push``, not ``git log push`` or ``echo git push``. An array of strings is read as an argument vector.

A **regular expression** is searched in the string (an array of strings: its elements joined by spaces), so it
sees the whole line: write it to find what it means anywhere (``curl … -X POST``).

A value that is neither a string nor an array of strings (missing, a number, an object) matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy.command_line import Words, argv_commands, commands, program
from checkpoint_mcp.intercept.policy.pointer import PointerError, parse_pointer, resolve

MATCH_KEYS: Final = frozenset({"pointer", "prefixes", "regex"})
SHOWN_PREFIXES: Final = 6  # prefixes a description names before it counts the rest
SHOWN_REGEX: Final = 60  # characters of a regular expression a description shows
_NOT_IN_PREFIX: Final = re.compile(r"""['"\\;&|()<>`$]""")


@dataclass(frozen=True)
class CommandPrefixes:
    """``prefixes``: each as written (white space normalised), and indexed by program for the test."""

    written: tuple[str, ...]
    by_program: Mapping[str, tuple[Words, ...]] = field(repr=False, compare=False)

    def test(self, lines: tuple[Words, ...]) -> bool:
        """Whether one of the commands ``lines`` is one of the prefixes."""
        for words in lines:
            wanted = self.by_program.get(program(words[0]))
            if wanted is not None and any(_follows(words, rest) for rest in wanted):
                return True
        return False


@dataclass(frozen=True)
class ArgumentMatch:
    """A sub-rule's test: the value at one of ``pointers`` matches ``prefixes`` or ``regex`` (exactly one)."""

    pointers: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...] = field(repr=False, compare=False)
    prefixes: CommandPrefixes | None = None
    regex: re.Pattern[str] | None = None

    def test(self, read: Read) -> bool:
        """Whether the arguments ``read`` holds match (``read`` keeps what each pointer holds for the next test)."""
        for pointer, tokens in zip(self.pointers, self.tokens, strict=True):
            if self.regex is not None:
                text = read.text(pointer, tokens)
                if text is not None and self.regex.search(text):
                    return True
            elif self.prefixes is not None and self.prefixes.test(read.lines(pointer, tokens)):
                return True
        return False

    def describe(self) -> str:
        """The test in words, for `checkpoint policy check`: ``/command runs git push, docker push``; a long list
        or expression is cut (``…, and 11 more``; ``…/``)."""
        where = " or ".join(self.pointers)
        if self.regex is not None:
            pattern = self.regex.pattern
            return f"{where} matches /{pattern if len(pattern) <= SHOWN_REGEX else pattern[:SHOWN_REGEX] + '…'}/"
        assert self.prefixes is not None
        written = self.prefixes.written
        shown = ", ".join(written[:SHOWN_PREFIXES])
        more = len(written) - SHOWN_PREFIXES
        return f"{where} runs {shown}" + (f", and {more} more" if more > 0 else "")


class Read:
    """A call's arguments as the sub-rules of its tool test them: the value at each pointer, as a string (an array
    of strings joined by spaces) and as the commands it runs, each read once for all the sub-rules of the call."""

    __slots__ = ("_arguments", "_lines", "_texts")

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        self._arguments = arguments
        self._texts: dict[str, str | None] = {}
        self._lines: dict[str, tuple[Words, ...]] = {}

    def text(self, pointer: str, tokens: tuple[str, ...]) -> str | None:
        """The string at ``pointer`` (an array of strings: joined by spaces), or None."""
        if pointer in self._texts:
            return self._texts[pointer]
        value = resolve(self._arguments, tokens)
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            text: str | None = " ".join(value)
        else:
            text = value if isinstance(value, str) else None
        self._texts[pointer] = text
        return text

    def lines(self, pointer: str, tokens: tuple[str, ...]) -> tuple[Words, ...]:
        """The commands the value at ``pointer`` runs (``command_line``); none for a value that is not text."""
        found = self._lines.get(pointer)
        if found is None:
            value = resolve(self._arguments, tokens)
            if isinstance(value, str):
                found = commands(value)
            elif isinstance(value, list) and all(isinstance(item, str) for item in value):
                found = argv_commands(value)
            else:
                found = ()
            self._lines[pointer] = found
        return found


def parse_match(table: Mapping[str, Any], at: str) -> ArgumentMatch:
    """The test of a sub-rule's table (``at``: the file and the rule, for errors).

    Raises:
        UsageError: no pointer, a bad pointer, neither or both of ``prefixes`` and ``regex``, a prefix that is not
            words of a command, or a regular expression that does not compile.
    """
    pointers = table.get("pointer")
    if isinstance(pointers, str):
        pointers = [pointers]
    if not isinstance(pointers, list) or not pointers or not all(isinstance(p, str) for p in pointers):
        raise UsageError(
            f'{at} pointer: the argument to test is required: a JSON pointer such as "/command", or an array of them'
        )
    tokens = []
    for pointer in pointers:
        if pointer == "":
            raise UsageError(f'{at} pointer: "" is the whole arguments object; name the argument, e.g. "/command"')
        try:
            tokens.append(parse_pointer(pointer))
        except PointerError as exc:
            raise UsageError(f"{at} pointer: {exc}") from exc
    if ("prefixes" in table) == ("regex" in table):
        raise UsageError(f"{at}: give exactly one of prefixes (command prefixes) and regex (a regular expression)")
    if "regex" in table:
        return ArgumentMatch(tuple(pointers), tuple(tokens), regex=_regex(table["regex"], f"{at} regex"))
    return ArgumentMatch(tuple(pointers), tuple(tokens), prefixes=_prefixes(table["prefixes"], f"{at} prefixes"))


def _regex(value: Any, at: str) -> re.Pattern[str]:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{at}: must be a non-empty string, a regular expression (got {type(value).__name__})")
    try:
        return re.compile(value)
    except re.error as exc:
        where = f" at {exc.pos}" if exc.pos is not None else ""
        raise UsageError(f"{at}: bad regular expression {value!r}: {exc.msg}{where}") from exc


def _prefixes(value: Any, at: str) -> CommandPrefixes:
    if not isinstance(value, list) or not value:
        raise UsageError(f'{at}: must be a non-empty array of command prefixes, such as ["git push", "npm publish"]')
    written: list[str] = []
    by_program: dict[str, list[Words]] = {}
    for item in value:
        words = item.split() if isinstance(item, str) else []
        if not words:
            raise UsageError(f"{at}: {item!r} is not a command prefix: give the words a command starts with")
        bad = _NOT_IN_PREFIX.search(item) if isinstance(item, str) else None
        if bad is not None:
            raise UsageError(
                f"{at}: {item!r} holds {bad.group()!r}: a prefix is plain words of one command, without quotes or "
                "shell operators (chained commands are each tested)"
            )
        written.append(" ".join(words))
        by_program.setdefault(program(words[0]), []).append(tuple(words[1:]))
    return CommandPrefixes(tuple(written), {name: tuple(rests) for name, rests in by_program.items()})


def _follows(words: Words, rest: Words) -> bool:
    """Whether the prefix's words after its program come in order after ``words[0]``, with only options and their
    values between them (``git -C repo push`` runs ``git push``; ``git log push`` does not)."""
    index = 1
    for wanted in rest:
        maybe_value = False
        while True:
            if index >= len(words):
                return False
            word = words[index]
            index += 1
            if word == wanted:
                break
            if word.startswith("-") and len(word) > 1:
                maybe_value = "=" not in word and word != "--"
            elif maybe_value:
                maybe_value = False
            else:
                return False
    return True
