"""The next checkpoint from the previous one, a save request and a fresh git scan: ``replace`` and ``merge``.

| Field                   | replace                  | merge                                                 |
|-------------------------|--------------------------|-------------------------------------------------------|
| goal                    | set                      | set                                                   |
| tasks                   | set                      | updated by matching description; new tasks appended   |
| summary, nextSteps      | set                      | replaced if provided, otherwise kept                  |
| decisions               | set                      | appended (deduplicated)                               |
| recentCommands          | set                      | appended; the oldest are dropped beyond 50            |
| modifiedFiles           | git scan + provided      | git scan + provided + previously recorded             |
| id, createdAt           | new                      | preserved                                             |

Everything here is pure: no disk, no git, no clock. ``fit`` then trims a checkpoint to ``FILE_BYTES_MAX``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from checkpoint_mcp.session import model
from checkpoint_mcp.session.model import Checkpoint, Command, FileEntry, GitFacts, Meta, Mode, Task

T = TypeVar("T")

AGENT_STATUS = "M"
"""The status of a file only the agent reported: the spec's ``M``."""


@dataclass(frozen=True)
class FileNote:
    """A file the agent reported, path already relative to the root, with an optional note."""

    path: str
    note: str | None = None


@dataclass(frozen=True)
class CommandInput:
    """A command the agent reported, before it is stamped with the save time."""

    command: str
    exit_code: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class SaveRequest:
    """What the agent sent, validated against the caps, redacted, and with relative paths.

    None means "not provided", which matters for ``merge``: a field left out keeps its previous value.
    """

    goal: str
    mode: Mode = "replace"
    tasks: tuple[Task, ...] | None = None
    summary: str | None = None
    next_steps: tuple[str, ...] | None = None
    decisions: tuple[str, ...] | None = None
    modified_files: tuple[FileNote, ...] | None = None
    recent_commands: tuple[CommandInput, ...] | None = None


@dataclass(frozen=True)
class Scanned:
    """A file the git scan found: relative path and porcelain status."""

    path: str
    status: str


@dataclass(frozen=True)
class Stamp:
    """What the server supplies for one save: identity, time, project, git facts, redactions."""

    new_id: str
    now: str
    project_name: str
    git: GitFacts | None
    redactions: int


@dataclass(frozen=True)
class Built:
    """The next checkpoint and one sentence per thing dropped to fit the limits."""

    checkpoint: Checkpoint
    dropped: tuple[str, ...]


def build(previous: Checkpoint | None, request: SaveRequest, scanned: Sequence[Scanned], stamp: Stamp) -> Built:
    """Apply the replace/merge table; file hashes are left empty for the caller to fill from the work tree."""
    merging = request.mode == "merge" and previous is not None
    base = previous if merging and previous is not None else None
    dropped: list[str] = []
    tasks = _merge_tasks(base.tasks if base else (), request.tasks or ())
    decisions = _dedupe((*(base.decisions if base else ()), *(request.decisions or ())))
    commands = (*(base.recent_commands if base else ()), *_stamped(request.recent_commands or (), stamp.now))
    files = _files(request.modified_files or (), scanned, base.modified_files if base else ())
    checkpoint = Checkpoint(
        id=base.id if base else stamp.new_id,
        created_at=base.created_at if base else stamp.now,
        updated_at=stamp.now,
        project_name=stamp.project_name,
        git=stamp.git,
        goal=request.goal,
        tasks=_cap(tasks, model.TASKS_MAX, "task(s)", dropped, pick=_oldest_done_first),
        summary=request.summary if request.summary is not None else (base.summary if base else ""),
        next_steps=request.next_steps if request.next_steps is not None else (base.next_steps if base else ()),
        decisions=_cap(decisions, model.DECISIONS_MAX, "oldest decision(s)", dropped, pick=_first),
        modified_files=_cap(files, model.MODIFIED_FILES_MAX, "file(s)", dropped, pick=_last),
        recent_commands=_cap(commands, model.RECENT_COMMANDS_MAX, "oldest command(s)", dropped, pick=_first),
        meta=Meta(redactions=stamp.redactions + (base.meta.redactions if base else 0), truncated=bool(dropped)),
    )
    return Built(checkpoint, tuple(dropped))


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _merge_tasks(previous: Sequence[Task], incoming: Sequence[Task]) -> tuple[Task, ...]:
    """Previous tasks updated in place by description (case and spacing ignored), new ones appended."""
    merged = list(previous)
    index = {_normal(t.description): i for i, t in enumerate(merged)}
    for task in incoming:
        key = _normal(task.description)
        if key in index:
            merged[index[key]] = task
        else:
            index[key] = len(merged)
            merged.append(task)
    return tuple(merged)


def _dedupe(items: Sequence[str]) -> tuple[str, ...]:
    seen: set[str] = set()
    kept: list[str] = []
    for item in items:
        key = _normal(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return tuple(kept)


def _stamped(commands: Sequence[CommandInput], now: str) -> tuple[Command, ...]:
    return tuple(Command(command=c.command, exit_code=c.exit_code, note=c.note, at=now) for c in commands)


def _files(
    provided: Sequence[FileNote], scanned: Sequence[Scanned], previous: Sequence[FileEntry]
) -> tuple[FileEntry, ...]:
    """Provided files first, then the rest of the git scan, then previously recorded ones; one entry per path.

    A file the scan found is ``source: git`` with the git status; a file only the agent reported, or carried
    over from an earlier save, is ``source: agent``. The note comes from this request, else the earlier one.
    """
    status = {s.path: s.status for s in scanned}
    earlier = {f.path: f for f in previous}
    notes = {f.path: f.note for f in provided if f.note}
    order = dict.fromkeys([*(f.path for f in provided), *(s.path for s in scanned), *(f.path for f in previous)])
    entries: list[FileEntry] = []
    for path in order:
        note = notes.get(path) or (earlier[path].note if path in earlier else None)
        if path in status:
            entries.append(FileEntry(path=path, status=status[path], source="git", note=note))
        elif path in earlier:
            entries.append(FileEntry(path=path, status=earlier[path].status, source="agent", note=note))
        else:
            entries.append(FileEntry(path=path, status=AGENT_STATUS, source="agent", note=note))
    return tuple(entries)


def _first(items: Sequence[object]) -> int:
    return 0


def _last(items: Sequence[object]) -> int:
    return len(items) - 1


def _oldest_done_first(items: Sequence[Task]) -> int:
    return next((i for i, t in enumerate(items) if t.status == "done"), 0)


def _cap(
    items: Sequence[T], limit: int, what: str, dropped: list[str], *, pick: Callable[[Sequence[T]], int]
) -> tuple[T, ...]:
    kept = list(items)
    while len(kept) > limit:
        del kept[pick(kept)]
    if len(items) > limit:
        dropped.append(f"dropped {len(items) - limit} {what} beyond the limit of {limit}")
    return tuple(kept)


# Which list gives way first when the file is too big, and which item of it: the spec drops the oldest
# commands first; then files (the last-listed first: carried over, then git-detected, then provided),
# decisions (oldest), next steps (the furthest away), and tasks (finished ones first).
_SHRINK_ORDER: tuple[tuple[str, str, Callable[[Sequence[Any]], int]], ...] = (
    ("recent_commands", "oldest command(s)", _first),
    ("modified_files", "file(s)", _last),
    ("decisions", "oldest decision(s)", _first),
    ("next_steps", "last next step(s)", _last),
    ("tasks", "task(s)", _oldest_done_first),
)


def _without(items: Sequence[Any], count: int, pick: Callable[[Sequence[Any]], int]) -> tuple[Any, ...]:
    kept = list(items)
    for _ in range(count):
        del kept[pick(kept)]
    return tuple(kept)


def _replaced(checkpoint: Checkpoint, name: str, items: tuple[Any, ...]) -> Checkpoint:
    changes: dict[str, Any] = {name: items}
    return dataclasses.replace(checkpoint, **changes)


def fit(checkpoint: Checkpoint, limit: int = model.FILE_BYTES_MAX) -> Built:
    """Trim the checkpoint to at most ``limit`` bytes of file: oldest commands first, then other lists."""
    size = len(model.serialize(checkpoint))
    dropped: list[str] = []
    for field, what, pick in _SHRINK_ORDER:
        if size <= limit:
            break
        items: tuple[Any, ...] = getattr(checkpoint, field)
        # The fewest removals that fit, by bisection: the size only shrinks as items go.
        low, high = 1, len(items)
        while low < high:
            middle = (low + high) // 2
            probe = _replaced(checkpoint, field, _without(items, middle, pick))
            if len(model.serialize(probe)) <= limit:
                high = middle
            else:
                low = middle + 1
        if items:
            checkpoint = _replaced(checkpoint, field, _without(items, low, pick))
            size = len(model.serialize(checkpoint))
            dropped.append(f"dropped {low} {what} to keep the file under {limit // 1024} KB")
    if size > limit:
        # Only the summary is left. The caps make this unreachable, but never write more than the limit.
        while size > limit and checkpoint.summary:
            cut = len(checkpoint.summary) - max(1, size - limit)
            checkpoint = dataclasses.replace(checkpoint, summary=checkpoint.summary[: max(0, cut)])
            size = len(model.serialize(checkpoint))
        dropped.append("shortened the summary to keep the file under the size limit")
    if dropped:
        checkpoint = dataclasses.replace(checkpoint, meta=dataclasses.replace(checkpoint.meta, truncated=True))
    return Built(checkpoint, tuple(dropped))
