"""The `.claude-checkpoint` file: the version-2 record, its limits, parsing with migrations, serialization.

Plain dataclasses and a hand-written validator rather than pydantic: `checkpoint brief` runs as a Claude Code
SessionStart hook on every session start, and pydantic alone would roughly triple its start-up time.

A file is parsed in three steps: JSON → a migration chain that lifts older layouts to the current one →
strict validation into a ``Checkpoint``. Versions newer than ``CURRENT_VERSION`` are refused, never guessed.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, cast

from checkpoint_mcp import __version__
from checkpoint_mcp.errors import CheckpointFileError, CheckpointVersionError

CURRENT_VERSION: Final = 2
GENERATOR_NAME: Final = "checkpoint-mcp"

# Limits the spec names, one per input field.
GOAL_MAX: Final = 500
TASKS_MAX: Final = 30
SUMMARY_MAX: Final = 4000
NEXT_STEPS_MAX: Final = 20
DECISIONS_MAX: Final = 20
MODIFIED_FILES_MAX: Final = 100
RECENT_COMMANDS_MAX: Final = 50
FILE_BYTES_MAX: Final = 64 * 1024
# The spec caps every field; these are the per-item caps it leaves to the implementation.
JOURNALS_MAX: Final = 20
"""Journaled workflows whose position a checkpoint records."""
ITEM_TEXT_MAX: Final = 500
"""A task description, next step, decision or note."""
COMMAND_MAX: Final = 2000
PATH_MAX: Final = 1024

TaskStatus = Literal["pending", "in_progress", "done", "blocked"]
TASK_STATUSES: Final[tuple[TaskStatus, ...]] = ("pending", "in_progress", "done", "blocked")
FileSource = Literal["git", "agent"]
Mode = Literal["replace", "merge"]

_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class Task:
    """One task and where it stands."""

    description: str
    status: TaskStatus


@dataclass(frozen=True)
class FileEntry:
    """A file the session touched: its porcelain status, who reported it, and its blob hash at save time."""

    path: str
    status: str
    source: FileSource
    note: str | None = None
    hash: str | None = None


@dataclass(frozen=True)
class Command:
    """A significant command the agent ran, with its exit code when known."""

    command: str
    at: str
    exit_code: int | None = None
    note: str | None = None


@dataclass(frozen=True)
class GitFacts:
    """Where the work tree stood at save time; ``branch`` is None on a detached HEAD."""

    branch: str | None
    head: str
    dirty: bool


@dataclass(frozen=True)
class Meta:
    """Bookkeeping: secrets redacted so far, and whether this save dropped anything to fit the limits."""

    redactions: int = 0
    truncated: bool = False


@dataclass(frozen=True)
class JournalPosition:
    """Where one journaled workflow stood at the save (version 2): its last sequence and that call's time.

    ``location`` is the journal as the proxy names it (an absolute SQLite path, or a PostgreSQL URL without its
    password); the counts and in-flight sequences let a load read only what came after, by the primary key.
    """

    location: str
    workflow: str
    head: str
    last_seq: int
    last_at: str | None
    calls: int
    completed: int
    failed: int
    pending: tuple[int, ...] = ()
    resolutions: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of the current version, as stored in ``<root>/.claude-checkpoint``."""

    id: str
    created_at: str
    updated_at: str
    project_name: str
    goal: str
    git: GitFacts | None = None
    tasks: tuple[Task, ...] = ()
    summary: str = ""
    next_steps: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    modified_files: tuple[FileEntry, ...] = ()
    recent_commands: tuple[Command, ...] = ()
    meta: Meta = field(default_factory=Meta)
    journals: tuple[JournalPosition, ...] = ()
    generator_name: str = GENERATOR_NAME
    generator_version: str = __version__


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``, as the spec's example file writes them."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(text: str) -> datetime:
    """The aware datetime of an ISO 8601 timestamp; naive ones are taken as UTC.

    Raises:
        ValueError: the text is not an ISO 8601 timestamp.
    """
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def is_relative_path(path: str) -> bool:
    """True for a normalized relative POSIX path that stays inside the root (no ``..``, not absolute)."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    normal = posixpath.normpath(path)
    return normal == path and normal != "." and not normal.startswith("../") and normal != ".."


# ---------------------------------------------------------------------------------------------------------
# Serialization


def to_document(checkpoint: Checkpoint) -> dict[str, Any]:
    """The JSON object of a checkpoint, keys in the spec's order, optional members left out when empty."""
    return {
        "version": CURRENT_VERSION,
        "id": checkpoint.id,
        "createdAt": checkpoint.created_at,
        "updatedAt": checkpoint.updated_at,
        "generator": {"name": checkpoint.generator_name, "version": checkpoint.generator_version},
        "project": {"name": checkpoint.project_name},
        "git": None
        if checkpoint.git is None
        else {"branch": checkpoint.git.branch, "head": checkpoint.git.head, "dirty": checkpoint.git.dirty},
        "goal": {
            "primary": checkpoint.goal,
            "tasks": [{"description": t.description, "status": t.status} for t in checkpoint.tasks],
        },
        "summary": checkpoint.summary,
        "nextSteps": list(checkpoint.next_steps),
        "decisions": list(checkpoint.decisions),
        "modifiedFiles": [_file_document(f) for f in checkpoint.modified_files],
        "recentCommands": [_command_document(c) for c in checkpoint.recent_commands],
        "meta": {"redactions": checkpoint.meta.redactions, "truncated": checkpoint.meta.truncated},
        "journals": [_journal_document(j) for j in checkpoint.journals],
    }


def _journal_document(position: JournalPosition) -> dict[str, Any]:
    return {
        "location": position.location,
        "workflow": position.workflow,
        "head": position.head,
        "lastSeq": position.last_seq,
        "lastAt": position.last_at,
        "calls": position.calls,
        "completed": position.completed,
        "failed": position.failed,
        "pending": list(position.pending),
        "resolutions": position.resolutions,
    }


def _file_document(entry: FileEntry) -> dict[str, Any]:
    document: dict[str, Any] = {"path": entry.path, "status": entry.status, "source": entry.source}
    if entry.note:
        document["note"] = entry.note
    if entry.hash:
        document["hash"] = entry.hash
    return document


def _command_document(command: Command) -> dict[str, Any]:
    document: dict[str, Any] = {"command": command.command}
    if command.exit_code is not None:
        document["exitCode"] = command.exit_code
    if command.note:
        document["note"] = command.note
    document["at"] = command.at
    return document


def serialize(checkpoint: Checkpoint) -> bytes:
    """The file's bytes: indented UTF-8 JSON, easy to read, diff and edit by hand."""
    return (json.dumps(to_document(checkpoint), ensure_ascii=False, indent=2) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------------------------
# Parsing and migrations


def parse(data: bytes) -> Checkpoint:
    """Parse a checkpoint file's bytes, migrating an older version to the current one.

    Raises:
        CheckpointVersionError: the file's version is newer than ``CURRENT_VERSION`` (``path`` is left empty).
        CheckpointFileError: the bytes are not JSON, or not a valid checkpoint of any known version.
    """
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointFileError(f"not valid JSON ({exc})") from exc
    return from_document(document)


def from_document(document: object) -> Checkpoint:
    """Validate a decoded JSON document into a ``Checkpoint``, migrating older versions first.

    Raises:
        CheckpointVersionError: the document's version is newer than ``CURRENT_VERSION``.
        CheckpointFileError: the document is not a valid checkpoint.
    """
    if not isinstance(document, dict):
        raise CheckpointFileError("the top level is not a JSON object")
    current = cast(dict[str, Any], document)
    version = current.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise CheckpointFileError(f"version: expected a non-negative integer, got {version!r}")
    if version > CURRENT_VERSION:
        raise CheckpointVersionError("", version, CURRENT_VERSION)
    while version < CURRENT_VERSION:
        current = MIGRATIONS[version](current)
        version += 1
    return _validate(current)


def _migrate_v0_to_v1(document: dict[str, Any]) -> dict[str, Any]:
    """Version 0 is the unversioned draft layout: a plain-string ``goal``, top-level ``tasks``, file paths as
    plain strings, and ``lastCommit`` instead of ``git``. Each value moves to its version-1 place."""
    migrated = {k: v for k, v in document.items() if k not in {"goal", "tasks", "lastCommit"}}
    migrated["version"] = 1
    goal = document.get("goal")
    migrated["goal"] = {"primary": goal, "tasks": document.get("tasks", [])} if isinstance(goal, str) else goal
    files = document.get("modifiedFiles", [])
    if isinstance(files, list):
        migrated["modifiedFiles"] = [
            {"path": f, "status": "M", "source": "agent"} if isinstance(f, str) else f for f in files
        ]
    last = document.get("lastCommit")
    if isinstance(last, dict) and "git" not in document:
        migrated["git"] = {
            "branch": last.get("branch"),
            "head": last.get("sha"),
            "dirty": bool(last.get("dirty")),
        }
    return migrated


def _migrate_v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 adds ``journals``, where each journaled workflow stood at the save. A version-1 file knew of
    none, so a load reads its journals by time instead (rows finished after ``updatedAt``)."""
    return {**document, "version": 2, "journals": []}


MIGRATIONS: Final[Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    0: _migrate_v0_to_v1,
    1: _migrate_v1_to_v2,
}
"""version N → version N+1; ``from_document`` applies them in order up to ``CURRENT_VERSION``."""


def _validate(document: dict[str, Any]) -> Checkpoint:
    goal = _object(document, "goal")
    project = document.get("project")
    generator = document.get("generator")
    meta = document.get("meta") or {}
    if not isinstance(meta, dict):
        raise CheckpointFileError("meta: expected an object")
    return Checkpoint(
        id=_text(document, "id", limit=200),
        created_at=_timestamp(document, "createdAt"),
        updated_at=_timestamp(document, "updatedAt"),
        project_name=_text(project, "name", "project.name", limit=PATH_MAX) if isinstance(project, dict) else "",
        generator_name=_text(generator, "name", "generator.name", limit=200) if isinstance(generator, dict) else "",
        generator_version=str(generator.get("version", "")) if isinstance(generator, dict) else "",
        git=_git(document.get("git")),
        goal=_text(goal, "primary", "goal.primary", limit=GOAL_MAX),
        tasks=tuple(_task(item, i) for i, item in enumerate(_list(goal, "tasks", "goal.tasks", TASKS_MAX))),
        summary=_optional_text(document, "summary", limit=SUMMARY_MAX) or "",
        next_steps=_strings(document, "nextSteps", NEXT_STEPS_MAX),
        decisions=_strings(document, "decisions", DECISIONS_MAX),
        modified_files=tuple(
            _file(item, i) for i, item in enumerate(_list(document, "modifiedFiles", None, MODIFIED_FILES_MAX))
        ),
        recent_commands=tuple(
            _command(item, i) for i, item in enumerate(_list(document, "recentCommands", None, RECENT_COMMANDS_MAX))
        ),
        meta=Meta(
            redactions=_integer(meta, "redactions", "meta.redactions", default=0, minimum=0),
            truncated=bool(meta.get("truncated", False)),
        ),
        journals=tuple(_journal(item, i) for i, item in enumerate(_list(document, "journals", None, JOURNALS_MAX))),
    )


def _object(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    if not isinstance(value, dict):
        raise CheckpointFileError(f"{key}: expected an object")
    return cast(dict[str, Any], value)


def _text(document: dict[str, Any], key: str, where: str | None = None, *, limit: int) -> str:
    value = document.get(key)
    if not isinstance(value, str) or not value:
        raise CheckpointFileError(f"{where or key}: expected a non-empty string")
    if len(value) > limit:
        raise CheckpointFileError(f"{where or key}: longer than {limit} characters")
    return value


def _optional_text(document: dict[str, Any], key: str, where: str | None = None, *, limit: int) -> str | None:
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CheckpointFileError(f"{where or key}: expected a string")
    if len(value) > limit:
        raise CheckpointFileError(f"{where or key}: longer than {limit} characters")
    return value


def _timestamp(document: dict[str, Any], key: str, where: str | None = None) -> str:
    value = _text(document, key, where, limit=64)
    try:
        parse_timestamp(value)
    except ValueError as exc:
        raise CheckpointFileError(f"{where or key}: not an ISO 8601 timestamp: {value!r}") from exc
    return value


def _integer(document: dict[str, Any], key: str, where: str, *, default: int | None, minimum: int | None = None) -> int:
    value = document.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        raise CheckpointFileError(f"{where}: expected an integer, got {value!r}")
    return value


def _list(document: dict[str, Any], key: str, where: str | None, limit: int) -> Sequence[object]:
    value = document.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CheckpointFileError(f"{where or key}: expected a list")
    if len(value) > limit:
        raise CheckpointFileError(f"{where or key}: more than {limit} items")
    return cast(list[object], value)


def _strings(document: dict[str, Any], key: str, limit: int) -> tuple[str, ...]:
    items = _list(document, key, None, limit)
    for i, item in enumerate(items):
        if not isinstance(item, str) or len(item) > ITEM_TEXT_MAX:
            raise CheckpointFileError(f"{key}[{i}]: expected a string of at most {ITEM_TEXT_MAX} characters")
    return tuple(cast(Sequence[str], items))


def _item(item: object, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise CheckpointFileError(f"{where}: expected an object")
    return cast(dict[str, Any], item)


def _git(value: object) -> GitFacts | None:
    if value is None:
        return None
    git = _item(value, "git")
    head = git.get("head")
    if not isinstance(head, str) or not _HASH.fullmatch(head):
        raise CheckpointFileError("git.head: expected a full commit hash")
    branch = _optional_text(git, "branch", "git.branch", limit=PATH_MAX)
    return GitFacts(branch=branch or None, head=head, dirty=bool(git.get("dirty", False)))


def _task(value: object, index: int) -> Task:
    where = f"goal.tasks[{index}]"
    task = _item(value, where)
    status = task.get("status")
    if status not in TASK_STATUSES:
        raise CheckpointFileError(f"{where}.status: expected one of {', '.join(TASK_STATUSES)}")
    return Task(
        description=_text(task, "description", f"{where}.description", limit=ITEM_TEXT_MAX),
        status=cast(TaskStatus, status),
    )


def _file(value: object, index: int) -> FileEntry:
    where = f"modifiedFiles[{index}]"
    entry = _item(value, where)
    path = _text(entry, "path", f"{where}.path", limit=PATH_MAX)
    if not is_relative_path(path):
        raise CheckpointFileError(f"{where}.path: expected a relative path inside the project, got {path!r}")
    source = entry.get("source", "agent")
    if source not in ("git", "agent"):
        raise CheckpointFileError(f"{where}.source: expected git or agent")
    digest = entry.get("hash")
    if digest is not None and (not isinstance(digest, str) or not _HASH.fullmatch(digest)):
        raise CheckpointFileError(f"{where}.hash: expected a git blob hash")
    return FileEntry(
        path=path,
        status=_text(entry, "status", f"{where}.status", limit=2),
        source=cast(FileSource, source),
        note=_optional_text(entry, "note", f"{where}.note", limit=ITEM_TEXT_MAX) or None,
        hash=digest,
    )


def _command(value: object, index: int) -> Command:
    where = f"recentCommands[{index}]"
    entry = _item(value, where)
    exit_code = entry.get("exitCode")
    if exit_code is not None:
        exit_code = _integer(entry, "exitCode", f"{where}.exitCode", default=None)
    return Command(
        command=_text(entry, "command", f"{where}.command", limit=COMMAND_MAX),
        at=_timestamp(entry, "at", f"{where}.at"),
        exit_code=exit_code,
        note=_optional_text(entry, "note", f"{where}.note", limit=ITEM_TEXT_MAX) or None,
    )


def _journal(value: object, index: int) -> JournalPosition:
    where = f"journals[{index}]"
    entry = _item(value, where)
    pending = _list(entry, "pending", f"{where}.pending", 1000)
    if not all(isinstance(seq, int) and not isinstance(seq, bool) and seq > 0 for seq in pending):
        raise CheckpointFileError(f"{where}.pending: expected positive integers")
    last_at = entry.get("lastAt")
    if last_at is not None:
        last_at = _timestamp(entry, "lastAt", f"{where}.lastAt")
    return JournalPosition(
        location=_text(entry, "location", f"{where}.location", limit=PATH_MAX),
        workflow=_text(entry, "workflow", f"{where}.workflow", limit=PATH_MAX),
        head=_text(entry, "head", f"{where}.head", limit=PATH_MAX),
        last_seq=_integer(entry, "lastSeq", f"{where}.lastSeq", default=None, minimum=0),
        last_at=last_at,
        calls=_integer(entry, "calls", f"{where}.calls", default=None, minimum=0),
        completed=_integer(entry, "completed", f"{where}.completed", default=None, minimum=0),
        failed=_integer(entry, "failed", f"{where}.failed", default=None, minimum=0),
        pending=tuple(cast(Sequence[int], pending)),
        resolutions=_integer(entry, "resolutions", f"{where}.resolutions", default=0, minimum=0),
    )
