"""What the model reads: the resume brief, the save confirmation, the full JSON, the SessionStart hook output.

The brief follows the spec's example line for line. It always stays under ``BRIEF_MAX_CHARS`` characters,
because clients cut longer context to a preview: when a checkpoint is too big, the longest sections are cut
first and a last line says what was cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from checkpoint_mcp.session.git import Drift
from checkpoint_mcp.session.model import Checkpoint, Command, GitFacts, parse_timestamp, to_document

BRIEF_MAX_CHARS: Final = 10_000
"""The brief is always shorter than this: Claude Code shows longer hook context only as a preview."""
BRIEF_COMMANDS: Final = 10
"""How many of the most recent commands the brief shows; ``format: "full"`` has all of them."""
SHORT_HASH: Final = 9

TASK_MARKS: Final = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]", "blocked": "[!]"}


def code(text: str) -> str:
    """Inline markdown code that survives backticks and line breaks inside the text."""
    flat = text.replace("\r\n", "\n").replace("\n", " ↵ ")
    fence = "`"
    while fence in flat:
        fence += "`"
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def age(seconds: float) -> str:
    """A short human age: ``just now``, ``12m ago``, ``3h ago``, ``2d ago``."""
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m ago"
    hours = minutes // 60
    return f"{hours}h ago" if hours < 48 else f"{hours // 24}d ago"


def branch_line(git: GitFacts) -> str:
    """``Branch `name` @ sha (uncommitted changes)``, or the detached form."""
    where = f"Branch {code(git.branch)}" if git.branch else "Detached HEAD"
    return f"{where} @ {git.head[:SHORT_HASH]} {'(uncommitted changes)' if git.dirty else '(clean)'}"


def _command_line(command: Command) -> str:
    if command.exit_code is None:
        mark = ""
    elif command.exit_code == 0:
        mark = "✓ "
    else:
        mark = f"✗ exit {command.exit_code} "
    note = f" — {command.note}" if command.note else ""
    return f"- {mark}{code(command.command)}{note}"


# ---------------------------------------------------------------------------------------------------------
# The brief, as parts that can be cut


@dataclass
class _Part:
    """One section of the brief: a title, its items, and how to render and cut them."""

    label: str
    title: Callable[[int], str]
    items: list[str]
    line: Callable[[int, str], str] = lambda _i, item: f"- {item}"
    fixed: list[str] = field(default_factory=list)
    joined: Callable[[list[str], int], str] | None = None
    """Renders all items as one line instead of one line each (the changed-files warning)."""
    from_start: bool = False
    """Cut the first items instead of the last (the oldest commands)."""
    text: bool = False
    """One paragraph, shortened rather than dropped."""
    total: int = 0
    cut: bool = False

    def __post_init__(self) -> None:
        self.total = len(self.items)

    def render(self) -> str:
        lines = [self.title(len(self.items)), *self.fixed]
        if self.joined is not None:
            if self.items:
                lines.append(self.joined(self.items, self.total - len(self.items)))
        else:
            offset = self.total - len(self.items) if self.from_start else 0
            lines.extend(self.line(offset + i, item) for i, item in enumerate(self.items))
            hidden = self.total - len(self.items)
            if hidden:
                lines.append(f"- … {hidden} more not shown")
        return "\n".join(lines)

    def shrink_to(self, size: int) -> None:
        """Cut items (or text) until the rendered part is at most ``size`` characters, or nothing is left."""
        self.cut = True
        if self.text:
            text = self.items[0]
            keep = max(0, len(text) - (len(self.render()) - size) - 1)
            self.items[0] = text[:keep].rstrip() + "…"
            return
        while self.items and len(self.render()) > size:
            excess = len(self.render()) - size
            count, saved = 0, 0
            ordered = self.items if self.from_start else list(reversed(self.items))
            for item in ordered:
                count += 1
                saved += len(item) + 4
                if saved >= excess:
                    break
            self.items = self.items[count:] if self.from_start else self.items[: len(self.items) - count]


def brief(
    checkpoint: Checkpoint,
    drift: Drift | None,
    *,
    now: datetime,
    drift_problem: str | None = None,
    warnings: Sequence[str] = (),
) -> str:
    """The markdown resume brief, shorter than ``BRIEF_MAX_CHARS`` whatever the checkpoint holds."""
    saved = parse_timestamp(checkpoint.updated_at)
    head = [
        f"# Resuming: {checkpoint.project_name} (checkpoint saved {age((now - saved).total_seconds())}, "
        f"{saved.strftime('%Y-%m-%d %H:%M:%S')} UTC)"
    ]
    if checkpoint.git is not None:
        head.append(branch_line(checkpoint.git))
    head.extend(f"> ⚠ {warning}" for warning in warnings)
    parts = _parts(checkpoint, drift, drift_problem)
    return _fit("\n".join(head), parts)


def _parts(checkpoint: Checkpoint, drift: Drift | None, drift_problem: str | None) -> list[_Part]:
    parts = [_Part("Goal", lambda _n: "## Goal", [checkpoint.goal], line=lambda _i, t: t, text=True)]
    if checkpoint.tasks:
        tasks = [f"{TASK_MARKS[t.status]} {t.description}" for t in checkpoint.tasks]
        parts.append(_Part("Tasks", lambda _n: "## Tasks", tasks))
    if checkpoint.summary:
        parts.append(
            _Part(
                "Where things stand",
                lambda _n: "## Where things stand",
                [checkpoint.summary],
                line=lambda _i, t: t,
                text=True,
            )
        )
    if checkpoint.next_steps:
        steps = list(checkpoint.next_steps)
        parts.append(_Part("Next steps", lambda _n: "## Next steps", steps, line=lambda i, s: f"{i + 1}. {s}"))
    if checkpoint.decisions:
        parts.append(_Part("Decisions & gotchas", lambda _n: "## Decisions & gotchas", list(checkpoint.decisions)))
    if checkpoint.modified_files:
        total = len(checkpoint.modified_files)
        files = [f"{f.path} ({f.status})" + (f" — {f.note}" if f.note else "") for f in checkpoint.modified_files]
        parts.append(_Part("Files touched", lambda _n: f"## Files touched ({total})", files))
    if checkpoint.recent_commands:
        shown = checkpoint.recent_commands[-BRIEF_COMMANDS:]
        parts.append(
            _Part(
                "Recent commands",
                lambda n: f"## Recent commands (last {n}, oldest first)",
                [_command_line(c)[2:] for c in shown],
                from_start=True,
            )
        )
    if checkpoint.git is not None:
        parts.append(_since(checkpoint.git, drift, drift_problem))
    return parts


def _since(saved: GitFacts, drift: Drift | None, problem: str | None) -> _Part:
    title = "## Since this checkpoint"
    if drift is None:
        reason = problem or "the project is no longer a git work tree with a commit"
        return _Part("Since this checkpoint", lambda _n: title, [], fixed=[f"- Drift unknown: {reason}."])
    fixed: list[str] = []
    if drift.commits_since is None:
        fixed.append(
            f"- ⚠ Saved commit {drift.saved_head[:SHORT_HASH]} is no longer reachable from HEAD "
            "(rebased or reset since the save?): history since the checkpoint is unknown, "
            "so re-read the files touched before editing"
        )
    elif drift.commits_since:
        fixed.append(f"- {drift.commits_since} new commit(s) on HEAD")
    if drift.branch_changed:
        before = code(saved.branch) if saved.branch else "detached HEAD"
        after = code(drift.current_branch) if drift.current_branch else "detached HEAD"
        fixed.append(f"- Branch changed: {before} → {after}")
    if not fixed and not drift.changed_since:
        fixed.append("- No changes since the checkpoint")

    def changed(paths: list[str], hidden: int) -> str:
        more = f" and {hidden} more" if hidden else ""
        return "- ⚠ Changed after the checkpoint, re-read before editing: " + ", ".join(map(code, paths)) + more

    return _Part("Since this checkpoint", lambda _n: title, list(drift.changed_since), fixed=fixed, joined=changed)


def _assemble(head: str, parts: Sequence[_Part], note: str) -> str:
    blocks = [head, *(p.render() for p in parts)]
    if note:
        blocks.append(note)
    return "\n\n".join(blocks)


def _note(parts: Sequence[_Part]) -> str:
    cut = [p for p in parts if p.cut]
    if not cut:
        return ""
    described = []
    for part in cut:
        if part.text or part.total == 0:
            described.append(f"{part.label} (shortened)")
        else:
            described.append(f"{part.label} ({len(part.items)} of {part.total} shown)")
    return (
        f"_Brief cut to stay under {BRIEF_MAX_CHARS:,} characters: {', '.join(described)}. "
        'Call load_session_checkpoint with format "full" for everything._'
    )


def _fit(head: str, parts: list[_Part]) -> str:
    text = _assemble(head, parts, "")
    while len(text) >= BRIEF_MAX_CHARS:
        excess = len(text) - BRIEF_MAX_CHARS + 1
        sizes = sorted(((len(p.render()), i) for i, p in enumerate(parts)), reverse=True)
        biggest, index = sizes[0]
        runner_up = sizes[1][0] if len(sizes) > 1 else 0
        # Cut the longest part down towards the next longest, so the longest sections give way first.
        target = min(max(runner_up, biggest - excess), biggest - 1)
        before = parts[index].render()
        parts[index].shrink_to(target)
        text = _assemble(head, parts, _note(parts))
        if parts[index].render() == before:
            # Nothing left to cut in the longest part; the fixed lines alone exceed the budget.
            return text[: BRIEF_MAX_CHARS - 1]
    return text


# ---------------------------------------------------------------------------------------------------------
# Other renderings


def nothing_to_resume(path: str) -> str:
    """The short line for a project with no checkpoint."""
    return f"No checkpoint at {path}: nothing to resume."


def save_confirmation(path: str, size: int, mode: str, checkpoint: Checkpoint, warnings: Sequence[str]) -> str:
    """The text a save returns to the model, as in the spec's example."""
    git = checkpoint.git
    if git is None:
        where = " (no git facts: not a git work tree, or no commit yet)"
    else:
        where = f" on {git.branch or 'detached HEAD'}@{git.head[:SHORT_HASH]}"
    lines = [
        f"Checkpoint saved to {path} ({size} bytes, {mode}).",
        f"{len(checkpoint.tasks)} task(s), {len(checkpoint.modified_files)} file(s), "
        f"{len(checkpoint.recent_commands)} command(s){where}.",
        *(f"⚠ {w}" for w in warnings),
    ]
    return "\n".join(lines)


def drift_document(drift: Drift | None) -> dict[str, Any] | None:
    """The ``drift`` object of a load result."""
    if drift is None:
        return None
    return {
        "branchChanged": drift.branch_changed,
        "currentBranch": drift.current_branch,
        "commitsSince": drift.commits_since,
        "changedSince": list(drift.changed_since),
    }


def full(checkpoint: Checkpoint, drift: Drift | None, warnings: Sequence[str] = ()) -> str:
    """``format: "full"``: the complete checkpoint JSON plus drift (and the load's warnings)."""
    document = {
        "checkpoint": to_document(checkpoint),
        "drift": drift_document(drift),
        "warnings": list(warnings),
    }
    return json.dumps(document, ensure_ascii=False, indent=2)


def session_start_hook(context: str) -> str:
    """Claude Code's SessionStart hook output, which adds ``context`` to the new session."""
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}},
        ensure_ascii=False,
    )
