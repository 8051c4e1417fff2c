"""What the model reads: the resume brief, the save confirmation, the full JSON, the SessionStart hook output.

The brief follows the spec's example line for line. It always stays under ``BRIEF_MAX_CHARS`` characters,
because clients cut longer context to a preview: when a checkpoint is too big, the longest sections are cut
first and a last line says what was cut.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _command_line(command: Command, limit: int | None = None) -> str:
    if command.exit_code is None:
        mark = ""
    elif command.exit_code == 0:
        mark = "✓ "
    else:
        mark = f"✗ exit {command.exit_code} "
    text, note = command.command, command.note
    if limit is not None:
        text, note = _clip(text, limit), note and _clip(note, limit // 2)
    return f"{mark}{code(text)}" + (f" — {note}" if note else "")


# ---------------------------------------------------------------------------------------------------------
# The brief, as parts that can be cut

ITEM_CUT: Final = 200
"""When a section must be cut, its long items are first shortened to about this many characters."""


@dataclass(frozen=True)
class _Item:
    """One line's content, in full and shortened for a brief that must be cut."""

    full: str
    short: str

    @classmethod
    def of(cls, text: str) -> _Item:
        """An item whose short form is the text clipped to ``ITEM_CUT``."""
        return cls(text, _clip(text, ITEM_CUT))


@dataclass
class _Part:
    """One section of the brief: a title, its items, and how to render and cut them."""

    label: str
    title: Callable[[int], str]
    items: list[_Item]
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
    shortened: bool = False

    def __post_init__(self) -> None:
        self.total = len(self.items)

    def _shown(self) -> list[str]:
        return [item.short if self.shortened else item.full for item in self.items]

    def render(self) -> str:
        """The section's markdown as it stands, with a line counting the entries cut."""
        lines = [self.title(len(self.items)), *self.fixed]
        shown = self._shown()
        hidden = self.total - len(shown)
        if self.joined is not None:
            if shown:
                lines.append(self.joined(shown, hidden))
        else:
            offset = hidden if self.from_start else 0
            lines.extend(self.line(offset + i, item) for i, item in enumerate(shown))
            if hidden:
                lines.append(f"- … {hidden} more not shown")
        return "\n".join(lines)

    def shrink_to(self, size: int) -> None:
        """Cut until the rendered part is at most ``size`` characters: shorten long items, then drop items."""
        self.cut = True
        if self.text:
            text = self.items[0].full
            keep = max(1, len(text) - (len(self.render()) - size))
            self.items[0] = _Item(_clip(text, keep), _clip(text, keep))
            return
        if not self.shortened and any(item.short != item.full for item in self.items):
            self.shortened = True
        while self.items and len(self.render()) > size:
            excess = len(self.render()) - size
            count, saved = 0, 0
            for text in self._shown() if self.from_start else reversed(self._shown()):
                count += 1
                saved += len(text) + 4
                if saved >= excess:
                    break
            self.items = self.items[count:] if self.from_start else self.items[: len(self.items) - count]

    def describe(self) -> str:
        """How this part was cut, for the note at the end of the brief."""
        if self.text or self.total == 0:
            return f"{self.label} (shortened)"
        long = ", long entries shortened" if self.shortened else ""
        return f"{self.label} ({len(self.items)} of {self.total} shown{long})"


def brief(
    checkpoint: Checkpoint,
    drift: Drift | None,
    *,
    now: datetime,
    drift_problem: str | None = None,
    warnings: Sequence[str] = (),
    effects: str = "",
) -> str:
    """The markdown resume brief, shorter than ``BRIEF_MAX_CHARS`` whatever the checkpoint holds.

    ``effects`` is the side-effects section (see ``effects.section``), placed after "Since this checkpoint";
    the other sections share what it leaves of the cap.
    """
    saved = parse_timestamp(checkpoint.updated_at)
    head = [
        f"# Resuming: {checkpoint.project_name} (checkpoint saved {age((now - saved).total_seconds())}, "
        f"{saved.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')} UTC)"
    ]
    if checkpoint.git is not None:
        head.append(branch_line(checkpoint.git))
    head.extend(f"> ⚠ {warning}" for warning in warnings)
    return _fit("\n".join(head), _parts(checkpoint, drift, drift_problem), effects)


def _texts(values: Sequence[str]) -> list[_Item]:
    return [_Item.of(value) for value in values]


def _parts(checkpoint: Checkpoint, drift: Drift | None, drift_problem: str | None) -> list[_Part]:
    paragraph: Callable[[int, str], str] = lambda _i, text: text  # noqa: E731 - a one-line renderer
    parts = [_Part("Goal", lambda _n: "## Goal", _texts([checkpoint.goal]), line=paragraph, text=True)]
    if checkpoint.tasks:
        tasks = [f"{TASK_MARKS[t.status]} {t.description}" for t in checkpoint.tasks]
        parts.append(_Part("Tasks", lambda _n: "## Tasks", _texts(tasks)))
    if checkpoint.summary:
        summary = _texts([checkpoint.summary])
        parts.append(
            _Part("Where things stand", lambda _n: "## Where things stand", summary, line=paragraph, text=True)
        )
    if checkpoint.next_steps:
        steps = _texts(checkpoint.next_steps)
        parts.append(_Part("Next steps", lambda _n: "## Next steps", steps, line=lambda i, s: f"{i + 1}. {s}"))
    if checkpoint.decisions:
        parts.append(_Part("Decisions & gotchas", lambda _n: "## Decisions & gotchas", _texts(checkpoint.decisions)))
    if checkpoint.modified_files:
        total = len(checkpoint.modified_files)
        files = [f"{f.path} ({f.status})" + (f" — {f.note}" if f.note else "") for f in checkpoint.modified_files]
        parts.append(_Part("Files touched", lambda _n: f"## Files touched ({total})", _texts(files)))
    if checkpoint.recent_commands:
        shown = checkpoint.recent_commands[-BRIEF_COMMANDS:]
        commands = [_Item(_command_line(c), _command_line(c, ITEM_CUT)) for c in shown]
        parts.append(
            _Part(
                "Recent commands",
                lambda n: f"## Recent commands (last {n}, oldest first)" if n else "## Recent commands",
                commands,
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
    if drift.unknown:
        fixed.append(
            f"- {drift.unknown} other uncommitted file(s) are not listed in the checkpoint (its file list was "
            "cut), so whether they changed since is unknown"
        )
    if not fixed and not drift.changed_since:
        fixed.append("- No changes since the checkpoint")

    def changed(paths: list[str], hidden: int) -> str:
        more = f" and {hidden} more" if hidden else ""
        return "- ⚠ Changed after the checkpoint, re-read before editing: " + ", ".join(map(code, paths)) + more

    paths = _texts(drift.changed_since)
    return _Part("Since this checkpoint", lambda _n: title, paths, fixed=fixed, joined=changed)


def _assemble(head: str, parts: Sequence[_Part], note: str, tail: str = "") -> str:
    blocks = [head, *(p.render() for p in parts)]
    if tail:
        blocks.append(tail)
    if note:
        blocks.append(note)
    return "\n\n".join(blocks)


def _note(parts: Sequence[_Part]) -> str:
    cut = [p.describe() for p in parts if p.cut]
    if not cut:
        return ""
    return (
        f"_Brief cut to stay under {BRIEF_MAX_CHARS:,} characters: {', '.join(cut)}. "
        'Call load_session_checkpoint with format "full" for everything._'
    )


def _level(sizes: Sequence[int], budget: int) -> int:
    """The largest size L such that the parts, each cut down to at most L, fit in ``budget`` together."""
    low, high = 0, max(sizes, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(size, middle) for size in sizes) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def _fit(head: str, parts: list[_Part], tail: str = "") -> str:
    """Cut the longest parts first, all down to one common size, until the brief fits with ``tail`` kept whole."""
    text = _assemble(head, parts, "", tail)
    reserve = len(tail) + 2 if tail else 0
    while len(text) >= BRIEF_MAX_CHARS:
        reserve += len(_note(parts)) or 400
        fixed = len(head) + 2 * len(parts) + 2 + reserve
        sizes = [len(part.render()) for part in parts]
        level = _level(sizes, BRIEF_MAX_CHARS - 1 - fixed)
        before = text
        for part, size in zip(parts, sizes, strict=True):
            if size > level:
                part.shrink_to(level)
        text = _assemble(head, parts, _note(parts), tail)
        if text == before or reserve > BRIEF_MAX_CHARS:
            # Nothing more can be cut: the titles and fixed lines alone are too long. Never send more.
            return text[: BRIEF_MAX_CHARS - 1]
    return text


# ---------------------------------------------------------------------------------------------------------
# Other renderings


def nothing_to_resume(path: str) -> str:
    """The short line for a project with no checkpoint and nothing in its journals."""
    return f"No checkpoint at {path}: nothing to resume."


def without_checkpoint(path: str, effects: str, warnings: Sequence[str]) -> str:
    """The brief of a project with no session checkpoint: the journals' side-effects section when they hold
    anything, else the "nothing to resume" line; then the warnings."""
    if not effects:
        return "\n".join([nothing_to_resume(path), *(f"⚠ {w}" for w in warnings)])
    head = [
        f"# Resuming without a session checkpoint (none at {path})",
        "No goal, tasks or next steps were saved, but the project's journals recorded the side effects below: "
        "check them before you act, and save a checkpoint with save_session_checkpoint as you go.",
        *(f"> ⚠ {w}" for w in warnings),
    ]
    return "\n".join(head) + "\n\n" + effects


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


def full(
    checkpoint: Checkpoint | None,
    drift: Drift | None,
    warnings: Sequence[str] = (),
    journals: Sequence[dict[str, Any]] | None = None,
) -> str:
    """``format: "full"``: the complete checkpoint JSON plus drift (the journals' digests, if any are configured,
    and the load's warnings)."""
    document: dict[str, Any] = {
        "checkpoint": None if checkpoint is None else to_document(checkpoint),
        "drift": drift_document(drift),
    }
    if journals:
        document["journals"] = list(journals)
    document["warnings"] = list(warnings)
    return json.dumps(document, ensure_ascii=False, indent=2)


HOOK_FORMATS = ("claude", "copilot", "cursor")
"""What a session-start hook prints, per client: ``claude`` (Claude Code, and the Codex, Gemini and Qwen hooks that
read the same JSON), ``copilot`` (GitHub Copilot CLI's ``sessionStart``), ``cursor`` (Cursor's ``sessionStart``)."""


def session_start_hook(context: str, shape: str = "claude") -> str:
    """A session-start hook's output, which adds ``context`` to the new session, in the JSON its client reads."""
    if shape == "copilot":
        return json.dumps({"additionalContext": context}, ensure_ascii=False)
    if shape == "cursor":
        return json.dumps({"additional_context": context}, ensure_ascii=False)
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}},
        ensure_ascii=False,
    )
