"""Shell command lines as a command-prefix rule reads them: every simple command a line would run, as its words.
Pure; no I/O.

A tool policy's ``prefixes = ["git push", "npm publish"]`` (in the style of Claude Code's ``Bash(git push:*)``)
is tested against each command a line runs, not only against its first words, so that a push hidden after
``npm test && `` is still a push:

- the line is cut at the shell's control operators (``&&``, ``||``, ``;``, ``|``, ``|&``, ``&``, a new line), at
  parentheses (subshells), and around ``$(`` … ``)`` and backquotes (command substitutions, whose commands run
  too, inside double quotes as well); ``{``, ``}`` and the keywords that open a compound command (``if``, ``then``,
  ``do``, ``while``, ``!`` …) are not commands; comments, redirections and here-documents' bodies go;
- quotes and backslashes are removed as the shell removes them (``git "push"`` is ``git push``); a program named
  by a path is named by its last part (``/usr/bin/git`` is ``git``; ``git.exe`` is ``git``);
- ``VAR=value cmd`` runs ``cmd``; so does a wrapper followed by its options and then the command: ``sudo``,
  ``doas``, ``env``, ``nohup``, ``time``, ``nice``, ``ionice``, ``stdbuf``, ``command``, ``exec``, ``xargs``,
  ``watch``, ``timeout DURATION``, ``flock FILE``, ``npx``, ``bunx``, ``pnpx``, ``uvx``, the shells (``sh``,
  ``bash``, ``zsh`` …, whose ``-c 'SCRIPT'`` is read as a line of its own), and the two-word runners ``npm exec``,
  ``pnpm dlx``, ``yarn dlx``, ``bun x``, ``uv run``, ``pipx run``, ``poetry run``, ``bundle exec`` and their
  like; ``python -m MODULE`` runs ``MODULE``; ``eval WORDS`` and ``ssh HOST COMMAND`` run their words as a line.

A wrapper's options are not known one by one: a word after an option may be that option's value or the command,
so both readings are kept, and a wrapper's argument holding white space (``sh -c 'git push'``, ``env -S '…'``) is
also read as a line. The reading errs towards finding a command: a prefix rule then catches more, never less (a
false catch costs one refused repeat; a missed one, a second push). It does not run anything, expand variables
or aliases, or read the scripts a command runs (``make deploy`` is ``make deploy``, whatever the Makefile does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final

Words = tuple[str, ...]
"""One simple command: its program, then its arguments, quotes removed."""

MAX_DEPTH: Final = 8
"""How deep wrappers and scripts inside scripts are read (``sh -c "sudo sh -c '…'"``)."""

_TOKEN: Final = re.compile(
    r"""
      (?P<space>(?:[ \t\r\f\v]|\\\n)+)
    | (?P<newline>\n)
    | (?P<comment>\#[^\n]*)
    | (?P<redirect>[0-9]*(?:&>>?|>>?&?[0-9]*-?|>\||<<<|<<-?|<>|<&?[0-9]*-?))
    | (?P<operator>&&|\|\||\|&|;;&?|;&|[;&|()`]|\$\()
    | (?P<word>(?:[^\s'"\\;&|()<>`$]+|'[^']*(?:'|\Z)|\$'(?:\\.|[^'\\])*(?:'|\Z)|"(?:\\.|[^"\\])*(?:"|\Z)
              |\\.|\\\Z|\$(?!\())+)
    """,
    re.VERBOSE | re.DOTALL,
)
"""A line's tokens: a whole word (its quoted and escaped pieces included), or what ends one."""
_PIECE: Final = re.compile(
    r"""(?P<single>'[^']*'?)|(?P<ansi>\$'(?:\\.|[^'\\])*'?)|(?P<double>"(?:\\.|[^"\\])*"?)|(?P<escape>\\.?)
    |(?P<plain>[^'"\\$]+|\$)""",
    re.VERBOSE | re.DOTALL,
)
"""The pieces of a word that holds quotes or escapes, each unquoted as the shell does."""
_QUOTING: Final = re.compile(r"['\"\\\\$]")
_DUPLICATED: Final = re.compile(r"&[0-9]*-?$")
_PLAIN_LINE: Final = re.compile(r"[^'\"\\`$#<>(){}]*")
"""A line the plain reading cuts exactly: words and control operators only."""
_CONTROL: Final = re.compile(r"&&|\|\||\|&|;;|[;&|\n]")
_DOUBLE_ESCAPE: Final = re.compile(r'\\([\\"$`\n])')
_SUBSTITUTION: Final = re.compile(r"\$\(((?:[^()]|\([^()]*\))*)\)|`([^`]*)`")
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_KEYWORDS: Final = frozenset(
    {"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time"}
)
_PYTHON: Final = re.compile(r"python[0-9.]*|py|pypy[0-9.]*")
_LINE_OPERATORS: Final = frozenset({"&&", "||", ";", "|", "|&", "&"})
_SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "pwsh", "powershell"})

_WRAPPERS: Final[dict[str, int]] = {
    # program -> how many words after its options are its own before the command (timeout's DURATION)
    **dict.fromkeys(_SHELLS, 0),
    **dict.fromkeys(("sudo", "doas", "env", "nohup", "time", "nice", "ionice", "stdbuf", "command"), 0),
    **dict.fromkeys(("exec", "builtin", "xargs", "watch", "chronic", "caffeinate", "unbuffer", "su"), 0),
    **dict.fromkeys(("npx", "bunx", "pnpx", "uvx"), 0),
    "timeout": 1,
    "flock": 1,
}
_RUNNERS: Final = frozenset(
    {
        ("npm", "exec"),
        ("npm", "x"),
        ("pnpm", "dlx"),
        ("pnpm", "exec"),
        ("yarn", "dlx"),
        ("yarn", "exec"),
        ("bun", "x"),
        ("uv", "run"),
        ("uv", "tool"),
        ("pipx", "run"),
        ("poetry", "run"),
        ("pdm", "run"),
        ("hatch", "run"),
        ("rye", "run"),
        ("pixi", "run"),
        ("conda", "run"),
        ("bundle", "exec"),
        ("dotenv", "run"),
        ("op", "run"),
        ("doppler", "run"),
    }
)
_LINES: Final[dict[str, int]] = {"eval": 0, "ssh": 1}
"""Programs whose words after their options (and after so many of their own: ssh's HOST) are a line to run."""


def commands(line: str, depth: int = 0) -> tuple[Words, ...]:
    """Every simple command ``line`` runs, and every reading of the commands behind its wrappers, in order."""
    found: list[Words] = []
    if _PLAIN_LINE.fullmatch(line):  # no quote, escape, substitution, comment, group or redirection: most lines
        for part in _CONTROL.split(line):
            words = _command(part.split())
            if words:
                found.extend(_readings(words, depth))
        return tuple(found)
    for words in _simple(line, found, depth):
        found.extend(_readings(words, depth))
    return tuple(found)


def argv_commands(argv: Sequence[str], depth: int = 0) -> tuple[Words, ...]:
    """The commands of an argument vector (``["git", "push"]``), cut where an element is a control operator."""
    found: list[Words] = []
    current: list[str] = []
    for word in [*argv, ";"]:
        if word in _LINE_OPERATORS:
            if current:
                found.extend(_readings(tuple(current), depth))
            current = []
        else:
            current.append(word)
    return tuple(found)


def program(word: str) -> str:
    """The program a command's first word names: its last path part, without an npm version (``tool@3``) or a
    Windows ``.exe``, ``.cmd``, ``.bat`` or ``.ps1`` ending."""
    if word.isalnum():  # git, npm, kubectl: most programs
        return word
    name = word.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    if "@" in name[1:]:  # npx wrangler@3, npx @scope/tool@latest
        name = name[: name.index("@", 1)]
    stem, dot, ending = name.rpartition(".")
    return stem if dot and stem and ending.lower() in ("exe", "cmd", "bat", "ps1") else name


def _simple(line: str, nested: list[Words], depth: int) -> Iterator[Words]:
    """The simple commands of ``line``, as written; commands substituted inside double quotes go to ``nested``."""
    words: list[str] = []
    skip_next = False  # a redirection's target is not a word of the command
    heredocs: list[tuple[str, bool]] = []  # here-documents to skip at the line's end (delimiter, tabs)
    position, end = 0, len(line)
    while position < end:
        match = _TOKEN.match(line, position)
        assert match is not None, "every character starts a token"
        position = match.end()
        kind = match.lastgroup
        if kind == "word":
            text = match.group()
            if _QUOTING.search(text):
                text = "".join(_unquoted(p.lastgroup, p.group(), nested, depth) for p in _PIECE.finditer(text))
            if not skip_next:
                words.append(text)
            elif heredocs and heredocs[-1][0] == "":
                skip_next, heredocs[-1] = False, (text, heredocs[-1][1])
            else:
                skip_next = False
        elif kind == "redirect":
            text = match.group()
            skip_next = not _DUPLICATED.search(text) or text.endswith(">&")
            if text in ("<<", "<<-"):
                heredocs.append(("", text == "<<-"))
        elif kind in ("operator", "newline"):
            if words:
                yield _command(words)
                words = []
            if kind == "newline" and heredocs:
                position = _past_heredocs(line, position, heredocs)
                heredocs = []
    if words:
        yield _command(words)


def _command(words: list[str]) -> Words:
    """A simple command without the keywords that open a compound command before it."""
    start = 0
    while start < len(words) and words[start] in _KEYWORDS:
        start += 1
    return tuple(words[start:])


def _unquoted(kind: str | None, text: str, nested: list[Words], depth: int) -> str:
    """A piece of a word as the shell passes it on; a double-quoted one's substitutions are read as commands."""
    if kind == "single":
        return text[1:-1] if len(text) > 1 and text.endswith("'") else text[1:]
    if kind == "ansi":
        return text[2:-1] if text.endswith("'") else text[2:]
    if kind == "escape":
        return text[1:]
    if kind == "double":
        body = text[1:-1] if len(text) > 1 and text.endswith('"') else text[1:]
        if depth < MAX_DEPTH and ("$(" in body or "`" in body):
            for found in _SUBSTITUTION.finditer(body):
                nested.extend(commands(found.group(1) or found.group(2) or "", depth + 1))
        return _DOUBLE_ESCAPE.sub(r"\1", body)
    return text


def _end_of_line(line: str, position: int) -> int:
    end = line.find("\n", position)
    return len(line) if end < 0 else end


def _past_heredocs(line: str, position: int, heredocs: list[tuple[str, bool]]) -> int:
    """Where the line goes on after the bodies of ``heredocs`` that start at ``position``."""
    for delimiter, tabs in heredocs:
        while position < len(line):
            end = _end_of_line(line, position)
            body_line = line[position:end]
            position = end + 1
            if (body_line.lstrip("\t") if tabs else body_line) == delimiter:
                break
    return position


def _readings(words: Words, depth: int) -> list[Words]:
    """``words`` without leading assignments, and the commands behind its wrappers, each read likewise."""
    found: list[Words] = []
    _read_from(words, 0, depth, set(), found)
    return found


def _read_from(words: Words, start: int, depth: int, seen: set[int], found: list[Words]) -> None:
    """Add the readings of ``words[start:]`` to ``found``; ``seen``: the starts already read (each suffix is read
    once, so a line of many wrappers and options costs its length times the options, never their product)."""
    while start < len(words) and "=" in words[start] and _ASSIGNMENT.match(words[start]):
        start += 1
    if start >= len(words) or start in seen:
        return
    seen.add(start)
    found.append(words[start:])
    if depth >= MAX_DEPTH:
        return
    name = program(words[start])
    if name in _LINES:
        for begin in _after_options(words, start + 1, _LINES[name]):
            found.extend(commands(" ".join(words[begin:]), depth + 1))
        return
    if name.startswith("py") and _PYTHON.fullmatch(name) and len(words) > start + 2 and words[start + 1] == "-m":
        _read_from(words, start + 2, depth + 1, seen, found)  # python3 -m twine upload: twine upload
        return
    skip = 1
    own = _WRAPPERS.get(name)
    if own is None and len(words) > start + 1 and (name, words[start + 1]) in _RUNNERS:
        skip, own = 2, 0
    if own is None:
        return
    for begin in _after_options(words, start + skip, own):
        if " " in words[begin] or "\n" in words[begin]:  # sh -c 'git push', env -S 'git push'
            found.extend(commands(words[begin], depth + 1))
        _read_from(words, begin, depth + 1, seen, found)


def _after_options(words: Words, start: int, own: int) -> Iterator[int]:
    """Where the command behind a wrapper may begin: after its options (a word after an option may be the
    option's value, so the word after that is a beginning too) and ``own`` positional words of its own."""
    maybe_value = False
    index = start
    while index < len(words):
        word = words[index]
        if word == "--":
            if index + 1 + own < len(words):
                yield index + 1 + own
            return
        if word.startswith("-") and len(word) > 1:
            maybe_value = "=" not in word
        else:
            if index + own < len(words):
                yield index + own
            if not maybe_value:
                return
            maybe_value = False
        index += 1
