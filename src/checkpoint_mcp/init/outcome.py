"""What one run of `checkpoint init` does to a client's files, whatever their shape: the one record every client's
files fill, and the one summary that tells it.

``plan`` reads the client's entry of the table (``clients.CLIENTS``) and has its files planned by the module that
knows their shape (JSON files in ``plan`` itself, with Claude Code's ``~/.claude.json`` scopes in ``scopes`` and
Gemini's user file in ``gemini``; Codex's TOML in ``codex``; the clients the table describes whole in
``client_files``): each fills this ``Outcome``, and ``summary`` prints it the same way for every client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from checkpoint_mcp.init import clients, policy_overview, scopes
from checkpoint_mcp.init.files import Change
from checkpoint_mcp.init.policies import Written

CHECKPOINT_IGNORED: Final = "/.claude-checkpoint*"
"""The session checkpoint file, its backup and its temp files (``session.store``), relative to the project."""


@dataclass
class Outcome:
    """The files to write for one client, and what they say."""

    client: str = clients.CLAUDE_CODE
    changes: list[Change] = field(default_factory=list)
    wrapped: list[scopes.Wrapped] = field(default_factory=list)
    """Every server wrapped: its scope, its name, the journal it writes to, and its file."""
    left_alone: list[tuple[str, str]] = field(default_factory=list)
    """(server, why) for every server `init` did not touch."""
    upgraded: list[str] = field(default_factory=list)
    """Servers an older `init` wrapped whose headers now go by ``--upstream-header-env``."""
    session: str | None = None
    """The name under which the session server was added."""
    session_journals: list[tuple[str, int]] = field(default_factory=list)
    """(session server, journals added) for a session server that did not list every wrapped server's journal."""
    brief: str | None = None
    """Where the brief's hook or plugin was added or brought up to date (``briefs.where``); None: it was right."""
    hook_repaired: bool = False
    """The brief hook an older ``init`` wrote had its matcher widened to every session source."""
    ignored_checkpoint: bool = False
    """``/.claude-checkpoint*`` was added to the project's ``.gitignore``."""
    policies: list[str] = field(default_factory=list)
    """The policy files written, one per server asked."""
    unasked: list[tuple[str, str, str]] = field(default_factory=list)
    """(server, why, the command that writes its tables later) for every server whose tools could not be
    listed: its file has ``[default]`` alone."""
    written: list[Written] = field(default_factory=list)
    """The policies written from what their servers listed: what each decided for each tool."""
    notes: list[str] = field(default_factory=list)
    """What the user must still do for the client to run what `init` wrote (trust a folder, restart it)."""


def missing_journals(journals: Sequence[tuple[str, str]], listed: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (journal, workflow) pairs of ``journals`` that ``listed`` lacks (a session server's), in order, each once."""
    missing: list[tuple[str, str]] = []
    for pair in journals:
        if pair not in listed and pair not in missing:
            missing.append(pair)
    return missing


def summary(outcome: Outcome, *, dry_run: bool) -> list[str]:
    """What a run did (or, with ``dry_run``, would do), one line each, for the terminal."""
    client = clients.CLIENTS[outcome.client]
    verb = "would wrap" if dry_run else "wrapped"
    lines = []
    for (scope, path), names in _by_file(outcome.wrapped).items():
        journal = "each its own journal" if scope == scopes.USER else "the project's journal"
        lines.append(f"{verb} ({scope} scope, {path}; {journal}): {', '.join(names)}")
    if outcome.upgraded:
        lines.append(f"{'would move' if dry_run else 'moved'} to --upstream-header-env: {', '.join(outcome.upgraded)}")
    lines += [f"left alone: {name} ({why})" for name, why in outcome.left_alone]
    for name, added in outcome.session_journals:
        lines.append(f"{'would give' if dry_run else 'gave'} the session server {name!r} {added} more journal(s)")
    if outcome.session:
        lines.append(f"{'would add' if dry_run else 'added'} the session server as {outcome.session!r}")
    if outcome.brief:
        label = client.label or client.name
        lines.append(f"{'would write' if dry_run else 'wrote'} {outcome.brief}: {label} sessions start with the brief")
    if outcome.hook_repaired:
        from checkpoint_mcp.init.wrap import HOOK_MATCHER

        lines.append(f"{'would widen' if dry_run else 'widened'} the SessionStart hook's matcher to {HOOK_MATCHER!r}")
    if outcome.ignored_checkpoint:
        lines.append(f"{'would add' if dry_run else 'added'} {CHECKPOINT_IGNORED!r} to .gitignore")
    lines += _policy_summary(outcome, dry_run=dry_run)
    if client.sessions and (outcome.changes or outcome.wrapped):
        lines.append(f"sessions: {client.sessions}")
    if outcome.changes:
        lines += [f"to do: {note}" for note in outcome.notes]
    if not outcome.changes:
        lines.append("nothing to change: every server already runs checkpoint")
    elif dry_run:
        lines.append("dry run: nothing was written")
    else:
        lines.append("originals kept; `checkpoint init --undo` puts them back")
    return lines


def _by_file(wrapped: Sequence[scopes.Wrapped]) -> dict[tuple[str, str], list[str]]:
    """The servers wrapped, by scope and file, in the order they were wrapped."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for each in wrapped:
        grouped.setdefault((each.scope, each.file), []).append(each.name)
    return grouped


def _policy_summary(outcome: Outcome, *, dry_run: bool) -> list[str]:
    """The policy files written, a row of counts per server, the tools to review first, and the servers that
    could not be asked."""
    lines = []
    if outcome.policies:
        folder = os.path.dirname(outcome.policies[0])
        lines.append(
            f"{'would write' if dry_run else 'wrote'} {len(outcome.policies)} active policies in {folder} "
            "(one per server, given with --policy; each table says why; --diff prints them)"
            + (":" if outcome.written else "")
        )
    lines += policy_overview.overview(outcome.written)
    for server, why, command in outcome.unasked:
        lines.append(
            f"warning: {server} could not be asked for its tools ({why}); its policy has [default] alone "
            f"(repeat refused within 24h). Write its tables later: {command}"
        )
    return lines
