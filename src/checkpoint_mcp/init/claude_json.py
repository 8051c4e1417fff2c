"""Claude Code's own ``~/.claude.json``: where its local-scope and user-scope servers live, changed entry by entry.

Claude Code keeps in one file per user both kinds of servers that are not in a project's ``.mcp.json``:

- **local** scope (``claude mcp add``, the default): ``projects["<absolute project path>"].mcpServers``;
- **user** scope (``claude mcp add -s user``): the top-level ``mcpServers``, started in every project.

Claude Code rewrites the file while it runs (a session's counters, the projects it saw), so `init` changes only
the server entries: every other key keeps its value and its place, and the text keeps the file's indentation
(two spaces, as Claude Code writes it) and its lack of a final newline. Each change is an ``Edit``: where the
entry is, what it was and what `init` made it, so ``--undo`` can put back just those entries of a file Claude Code
has changed since (``revert``).

A user-scope server runs in every project, so its journal is the user's, one per server:
``$XDG_DATA_HOME/checkpoint/<server>.db`` (``~/.local/share/checkpoint/<server>.db`` without the variable).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.errors import ClientConfigError
from checkpoint_mcp.platforms import paths

FILE_NAME: Final = ".claude.json"
CONFIG_DIR_ENV: Final = "CLAUDE_CONFIG_DIR"
_INDENT: Final = re.compile(r"\n([ \t]+)\S")
_NOT_FILE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")


def home(environ: Mapping[str, str]) -> str:
    """``$HOME`` (the user's home folder when the variable is unset)."""
    return environ.get("HOME") or os.path.expanduser("~")


def path(environ: Mapping[str, str]) -> str:
    """The absolute path of ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set, as the
    CLI does)."""
    return os.path.join(environ.get(CONFIG_DIR_ENV) or home(environ), FILE_NAME)


def user_settings_path(environ: Mapping[str, str]) -> str:
    """Claude Code's user settings, ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json``), where its
    user-wide hooks live."""
    return os.path.join(environ.get(CONFIG_DIR_ENV) or os.path.join(home(environ), ".claude"), "settings.json")


def user_journal_folder(environ: Mapping[str, str]) -> str:
    """The folder of the user-scope servers' journals: ``$XDG_DATA_HOME/checkpoint``, else
    ``~/.local/share/checkpoint`` (macOS and Windows: their own folder, ``platforms.paths``)."""
    return paths.user_data(environ)


def user_journal(server: str, environ: Mapping[str, str]) -> str:
    """The journal of one user-scope server (its name made safe as a file name)."""
    safe = _NOT_FILE_NAME.sub("_", server).strip(".") or "server"
    return os.path.join(user_journal_folder(environ), f"{safe}.db")


Pointer = tuple[str, ...]
"""Where an entry is in the document: ``("mcpServers", name)`` or ``("projects", path, "mcpServers", name)``."""


@dataclass(frozen=True)
class Edit:
    """One server entry `init` rewrote: where it is, what it was, what it became."""

    pointer: Pointer
    before: Any
    after: Any

    def record(self) -> dict[str, Any]:
        """The edit as JSON, for the run's manifest."""
        return {"pointer": list(self.pointer), "before": self.before, "after": self.after}

    @staticmethod
    def from_record(record: Mapping[str, Any]) -> Edit:
        """An edit read back from a manifest.

        Raises:
            KeyError, TypeError: the record is not one ``record`` wrote.
        """
        pointer = record["pointer"]
        if not isinstance(pointer, list) or not all(isinstance(p, str) for p in pointer):
            raise TypeError(f"pointer {pointer!r} is not a list of strings")
        return Edit(tuple(pointer), record["before"], record["after"])


def local_pointer(project: str) -> Pointer:
    """Where a project's local-scope servers are."""
    return ("projects", project, "mcpServers")


USER_POINTER: Final[Pointer] = ("mcpServers",)


def servers_at(document: Any, pointer: Pointer, file: str) -> dict[str, Any]:
    """The servers table at ``pointer`` (an empty one when any key on the way is missing).

    Raises:
        ClientConfigError: the file or something on the way is not a JSON object.
    """
    node = document
    for depth, key in enumerate(pointer):
        if not isinstance(node, dict):
            where = ".".join(pointer[:depth]) or "the file"
            raise ClientConfigError(file, f"{where} is not a JSON object")
        node = node.get(key, {})
    if not isinstance(node, dict):
        raise ClientConfigError(file, f"{'.'.join(pointer)} is not an object of servers")
    return node


def render(value: Any, like: bytes | None) -> bytes:
    """``value`` as the text of the file it replaces: its indentation (two spaces by default, as Claude Code
    writes) and a final newline only if it had one (Claude Code writes none)."""
    indent: str | int = 2
    text = like.decode("utf-8", "replace") if like else ""
    found = _INDENT.search(text)
    if found:
        indent = found.group(1)
    ending = "\n" if text.endswith("\n") else ""
    return (json.dumps(value, indent=indent, ensure_ascii=False) + ending).encode("utf-8")


def apply_edits(document: Any, edits: Sequence[Edit], *, undo: bool = False) -> list[Edit]:
    """Set each edit's entry in ``document`` (a parsed file, changed in place) to its ``after`` or, with
    ``undo``, back to its ``before``; returns the edits skipped because the entry is not what they expect (it was
    changed or removed since), which are left as they are."""
    skipped = []
    for edit in edits:
        expected, wanted = (edit.after, edit.before) if undo else (edit.before, edit.after)
        *route, name = edit.pointer
        table: Any = document
        for key in route:
            table = table.get(key) if isinstance(table, dict) else None
        if not isinstance(table, dict) or table.get(name) != expected:
            skipped.append(edit)
            continue
        table[name] = wanted
    return skipped


def revert(current: bytes, edits: Sequence[Edit], file: str) -> tuple[bytes, list[Edit]]:
    """The text of ``current`` with every entry `init` changed put back as it was, all else as it is now; and
    the edits left alone because the entry was changed since.

    Raises:
        ClientConfigError: ``current`` is not a JSON object.
    """
    try:
        document = json.loads(current.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ClientConfigError(file, f"is not valid JSON now ({exc}), so init's entries cannot be put back") from exc
    if not isinstance(document, dict):
        raise ClientConfigError(file, "the file is not a JSON object")
    skipped = apply_edits(document, edits, undo=True)
    return render(document, current), skipped
