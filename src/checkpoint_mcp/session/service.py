"""Save and load, end to end: the one place that ties root, store, git, redaction, merge and rendering together.

The MCP server (``checkpoint session``) and ``checkpoint brief`` both call this module; it never imports the
MCP SDK or pydantic, so the hook command starts fast. What only a save needs (``merge``, ``redact``, ``uuid``)
is imported by ``save``: a load never pays for it. Every function here blocks (git, fsync): the server runs
them in a worker thread, one call at a time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from checkpoint_mcp.errors import CheckpointFileError, CheckpointVersionError, GitError
from checkpoint_mcp.session import git, journals, model, render, store
from checkpoint_mcp.session.git import Drift, Snapshot
from checkpoint_mcp.session.gitproc import SnapshotRun
from checkpoint_mcp.session.journals import JournalSpec, Setup, WorkflowDigest
from checkpoint_mcp.session.model import Checkpoint, Mode, Task
from checkpoint_mcp.session.root import ProjectRoot, RootSource, relative_path, resolve_root

if TYPE_CHECKING:
    from checkpoint_mcp.session.merge import SaveRequest
    from checkpoint_mcp.session.redact import Redactor

Format = Literal["brief", "full"]


@dataclass(frozen=True)
class SaveOutcome:
    """What a save did: where, how big, the checkpoint written, this save's redactions, and the warnings."""

    path: str
    size: int
    mode: Mode
    checkpoint: Checkpoint
    redactions: int
    warnings: tuple[str, ...]

    @property
    def text(self) -> str:
        """The confirmation shown to the model."""
        return render.save_confirmation(self.path, self.size, self.mode, self.checkpoint, self.warnings)


@dataclass(frozen=True)
class LoadOutcome:
    """What a load found: the checkpoint (None when there is nothing to resume), its drift, and the text."""

    path: str
    checkpoint: Checkpoint | None
    from_backup: bool
    drift: Drift | None
    warnings: tuple[str, ...]
    text: str
    journals: tuple[WorkflowDigest, ...] = ()

    @property
    def found(self) -> bool:
        """True when there is a checkpoint to resume from."""
        return self.checkpoint is not None


def save(
    request: SaveRequest, root: ProjectRoot, *, now: datetime | None = None, setup: Setup = journals.NONE
) -> SaveOutcome:
    """Redact the request, merge it with the previous checkpoint and the git scan, and write it crash-safely.

    With journals in ``setup``, the checkpoint records where each journaled workflow stood.

    Raises:
        PathOutsideProject: a file path in the request resolves outside the project root.
        CheckpointVersionError: the existing checkpoint was written by a newer Checkpoint; it is left alone.
        CheckpointFileError: the checkpoint could not be written.
    """
    import uuid

    from checkpoint_mcp.session import merge
    from checkpoint_mcp.session.merge import Scanned, Stamp
    from checkpoint_mcp.session.redact import Redactor

    moment = now or datetime.now(UTC)
    redactor = Redactor()
    clean = _clean(request, root.path, redactor)
    warnings: list[str] = list(setup.warnings)
    with store.locked(root.path, exclusive=True):
        previous = _previous(root.path, request.mode, warnings)
        snapshot = _snapshot(root.path, warnings)
        scanned = [Scanned(e.path, e.status) for e in snapshot.entries] if snapshot else []
        stamp = Stamp(
            new_id=str(uuid.uuid4()),
            now=model.format_timestamp(moment),
            project_name=root.name,
            git=snapshot.facts if snapshot else None,
            redactions=redactor.count,
        )
        built = merge.build(previous, clean, scanned, stamp)
        checkpoint = _with_hashes(root.path, built.checkpoint, warnings) if snapshot else built.checkpoint
        if setup.journals:
            positions = journals.positions(setup.journals, warnings)
            if len(positions) > model.JOURNALS_MAX:
                warnings.append(
                    f"Recorded the position of the first {model.JOURNALS_MAX} of {len(positions)} journaled "
                    "workflows; the others are read by time at the next load."
                )
            checkpoint = dataclasses.replace(checkpoint, journals=positions[: model.JOURNALS_MAX])
        fitted = merge.fit(checkpoint)
        data = model.serialize(fitted.checkpoint)
        store.write(root.path, data)
    dropped = built.dropped + fitted.dropped
    if redactor.count:
        warnings.insert(0, f"Redacted {redactor.count} secret-looking value(s).")
    if snapshot is not None and _ignored(root.path) is False:
        warnings.append(
            f"{store.checkpoint_path(root.path)} is not git-ignored: add `.claude-checkpoint*` to .gitignore "
            "(the session server never edits it; `checkpoint init` adds it)."
        )
    if dropped:
        warnings.append(f"Trimmed to fit the limits: {'; '.join(dropped)}.")
    warnings.extend(_root_warnings(root, in_work_tree=lambda: snapshot is not None or git.in_work_tree(root.path)))
    return SaveOutcome(
        path=store.checkpoint_path(root.path),
        size=len(data),
        mode=request.mode,
        checkpoint=fitted.checkpoint,
        redactions=redactor.count,
        warnings=tuple(warnings),
    )


def load(
    root: ProjectRoot,
    *,
    output: Format = "brief",
    now: datetime | None = None,
    setup: Setup = journals.NONE,
) -> LoadOutcome:
    """Read the checkpoint (or its backup), compute drift, read the journals, and render the brief or full JSON.

    Raises:
        CheckpointVersionError: the checkpoint was written by a newer Checkpoint.
        CheckpointFileError: a checkpoint exists but neither it nor its backup can be used.
    """
    path = store.checkpoint_path(root.path)
    run: SnapshotRun | None = None
    with store.locked(root.path, exclusive=False):
        stored = store.read(root.path)

    def in_work_tree() -> bool:
        # One rev-parse per load: the snapshot's, when it ran (a computed drift proves a work tree already).
        return run.in_work_tree() if run is not None else git.in_work_tree(root.path)

    if stored is None:
        return _without_checkpoint(root, path, output, setup, in_work_tree)
    checkpoint = stored.checkpoint
    drift: Drift | None = None
    problem: str | None = None
    created: SnapshotRun | None = None
    journal_warnings = list(setup.warnings)
    try:
        if checkpoint.git is not None and run is None:
            run = created = git.start_snapshot(root.path)
        # The journals are read while git status runs.
        found_journals = journals.digests(setup.journals, checkpoint.journals, checkpoint.updated_at, journal_warnings)
        if checkpoint.git is not None and run is not None:
            try:
                drift = git.drift(
                    root.path,
                    checkpoint.git,
                    checkpoint.modified_files,
                    complete=_lists_all_files(checkpoint),
                    started=run,
                )
            except GitError as exc:
                problem = str(exc)
        found = drift is not None
        warnings = [*stored.warnings, *_root_warnings(root, in_work_tree=lambda: found or in_work_tree())]
        warnings += journal_warnings
    finally:
        if created is not None:
            created.cancel()
    if output == "full":
        data = journals.as_data(found_journals) if found_journals else None
        text = render.full(checkpoint, drift, warnings, data)
    else:
        moment = now or datetime.now(UTC)
        section = ""
        if found_journals:
            from checkpoint_mcp.session import effects

            section = effects.section(found_journals)
        text = render.brief(checkpoint, drift, now=moment, drift_problem=problem, warnings=warnings, effects=section)
    return LoadOutcome(path, checkpoint, stored.from_backup, drift, tuple(warnings), text, found_journals)


def _without_checkpoint(
    root: ProjectRoot, path: str, output: Format, setup: Setup, in_work_tree: Callable[[], bool]
) -> LoadOutcome:
    """No session checkpoint: still what the journals know, from the start of each workflow (``found`` stays
    False). "Nothing to resume" only when the journals hold nothing either."""
    journal_warnings = list(setup.warnings)
    found_journals = journals.digests(setup.journals, (), None, journal_warnings)
    warnings = [*_root_warnings(root, in_work_tree=in_work_tree), *journal_warnings]
    section = ""
    if found_journals:
        from checkpoint_mcp.session import effects

        section = effects.section(found_journals, since_checkpoint=False)
    if output == "full" and section:
        text = render.full(None, None, warnings, journals.as_data(found_journals))
    else:
        text = render.without_checkpoint(path, section, warnings)
    return LoadOutcome(path, None, False, None, tuple(warnings), text, found_journals)


def brief_text(
    project_root: str | None,
    *,
    output: Format,
    hook: bool,
    environ: Mapping[str, str],
    cwd: str,
    journal_specs: Sequence[JournalSpec] = (),
    session_start: str | None = None,
    hook_format: str = "claude",
    session_id: str | None = None,
) -> str:
    """What ``checkpoint brief`` prints: the brief (or full JSON), optionally wrapped as session-start hook output
    in the JSON of ``hook_format`` (``render.HOOK_FORMATS``).

    The journals are ``journal_specs``, else ``CHECKPOINT_JOURNAL``, else the project's ``.mcp.json``.
    ``session_start``: the agent's client is starting a session (its source: ``startup``, ``resume``, ``clear``,
    ``compact``, ``new``, ``unknown``; ``session_id``: the client's id of it), which is recorded in each journal
    first, under the client session this runs in (``journal/session_starts.py``): a repeat of a call from before it
    is the resumed agent's, even where that session's proxies live on.

    Raises:
        ProjectRootError: the project root is not an absolute path to an existing directory.
        CheckpointFileError: a checkpoint exists but cannot be used (see ``load``).
    """
    root = resolve_root(project_root, environ=environ, cwd=cwd, argument_label="--project-root")
    setup = journals.configured(journal_specs, root=root.path, environ=environ, cwd=cwd)
    if session_start is not None:
        journals.mark_session_start(setup, session_start, session_id)
    outcome = load(root, output=output, setup=setup)
    return render.session_start_hook(outcome.text, hook_format) if hook else outcome.text


def _lists_all_files(checkpoint: Checkpoint) -> bool:
    """Whether the checkpoint's file list can hold every file that was uncommitted when it was saved.

    A full list may have been cut at the cap. Trimming to the size limit drops every command before any file,
    so a trimmed checkpoint without commands may have lost files too.
    """
    if len(checkpoint.modified_files) >= model.MODIFIED_FILES_MAX:
        return False
    return not (checkpoint.meta.truncated and not checkpoint.recent_commands)


def _clip(text: str, limit: int) -> str:
    # Redaction can lengthen a short secret; the file's caps still hold.
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clean(request: SaveRequest, root: str, redact: Redactor) -> SaveRequest:
    """Redact every free-text field and store every path relative to the root."""
    from checkpoint_mcp.session.merge import CommandInput, FileNote, SaveRequest

    def text(value: str, limit: int = model.ITEM_TEXT_MAX) -> str:
        return _clip(redact(value), limit)

    def optional(value: str | None) -> str | None:
        return None if value is None else text(value)

    return SaveRequest(
        goal=text(request.goal, model.GOAL_MAX),
        mode=request.mode,
        tasks=None if request.tasks is None else tuple(Task(text(t.description), t.status) for t in request.tasks),
        summary=None if request.summary is None else text(request.summary, model.SUMMARY_MAX),
        next_steps=None if request.next_steps is None else tuple(text(s) for s in request.next_steps),
        decisions=None if request.decisions is None else tuple(text(d) for d in request.decisions),
        modified_files=None
        if request.modified_files is None
        else tuple(FileNote(relative_path(root, f.path), optional(f.note)) for f in request.modified_files),
        recent_commands=None
        if request.recent_commands is None
        else tuple(
            CommandInput(text(c.command, model.COMMAND_MAX), c.exit_code, optional(c.note))
            for c in request.recent_commands
        ),
    )


def _previous(root: str, mode: Mode, warnings: list[str]) -> Checkpoint | None:
    """The checkpoint to merge onto (read in both modes, so a newer version is refused either way)."""
    try:
        stored = store.read(root)
    except CheckpointVersionError:
        raise
    except CheckpointFileError as exc:
        warnings.append(f"The previous checkpoint could not be read, so nothing was merged from it: {exc}.")
        return None
    if stored is None:
        return None
    if stored.from_backup and mode == "merge":
        warnings.append(
            f"Merged onto the backup {store.backup_path(root)}: the main checkpoint file was unusable "
            "(the backup was kept as it was)."
        )
    return stored.checkpoint


def _snapshot(root: str, warnings: list[str]) -> Snapshot | None:
    try:
        return git.snapshot(root)
    except GitError as exc:
        warnings.append(f"Saved without git facts, so drift cannot be detected for this checkpoint: {exc}.")
        return None


def _with_hashes(root: str, checkpoint: Checkpoint, warnings: list[str]) -> Checkpoint:
    try:
        hashes = git.hash_files(root, [f.path for f in checkpoint.modified_files])
    except GitError as exc:
        warnings.append(f"Saved without file hashes, so changed files cannot be detected: {exc}.")
        return checkpoint
    files = tuple(dataclasses.replace(f, hash=hashes.get(f.path)) for f in checkpoint.modified_files)
    return dataclasses.replace(checkpoint, modified_files=files)


def _ignored(root: str) -> bool | None:
    try:
        return git.is_ignored(root, store.CHECKPOINT_NAME)
    except GitError:
        return None


def _root_warnings(root: ProjectRoot, *, in_work_tree: Callable[[], bool]) -> list[str]:
    # Asked lazily: only a root that came from the working directory needs the extra git call.
    if root.source is not RootSource.WORKING_DIRECTORY or in_work_tree():
        return []
    return [
        f"The project root {root.path} is only the working directory, and it is not a git work tree. "
        "If that is not your project, name it with projectRoot (--project-root) or CHECKPOINT_PROJECT_ROOT."
    ]
