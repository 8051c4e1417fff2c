"""The checkpoint files on disk: crash-safe writes, the backup, and reading with fallback.

``<root>/.claude-checkpoint`` is the checkpoint; ``<root>/.claude-checkpoint.prev`` is the previous valid one.
Every write goes temp file → fsync → rename → fsync of the folder, with mode 0600, so a crash at any instant
leaves each name holding either its old or its new complete content. The backup is refreshed only from a main
file that parses, so a corrupt file never overwrites a good backup. Saves hold an exclusive lock on the project
folder (``platforms.locks.holding_folder``: ``flock`` on the folder itself, or a lock file in the user's state
folder where folders cannot be locked; never a file added to the project), so two servers on one project take
turns.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from checkpoint_mcp import debug
from checkpoint_mcp.errors import CheckpointFileError, CheckpointVersionError
from checkpoint_mcp.platforms import files, locks
from checkpoint_mcp.session import model

CHECKPOINT_NAME: Final = ".claude-checkpoint"
BACKUP_NAME: Final = CHECKPOINT_NAME + ".prev"
TEMP_PREFIX: Final = CHECKPOINT_NAME + ".tmp-"
FILE_MODE: Final = 0o600


def checkpoint_path(root: str) -> str:
    """Where the checkpoint lives: always exactly ``<root>/.claude-checkpoint``."""
    return os.path.join(root, CHECKPOINT_NAME)


def backup_path(root: str) -> str:
    """Where the previous valid checkpoint is kept."""
    return os.path.join(root, BACKUP_NAME)


def is_checkpoint_file(relative: str) -> bool:
    """True for the checkpoint's own files (main, backup, temp), which are never reported as project files."""
    return relative in (CHECKPOINT_NAME, BACKUP_NAME) or relative.startswith(TEMP_PREFIX)


@dataclass(frozen=True)
class Stored:
    """A checkpoint read from disk; ``from_backup`` when the main file was unusable and the backup served."""

    checkpoint: model.Checkpoint
    from_backup: bool
    warnings: tuple[str, ...] = ()


@contextlib.contextmanager
def locked(root: str, *, exclusive: bool) -> Iterator[None]:
    """Hold a lock on the project folder: exclusive for a save, shared for a load.

    Raises:
        CheckpointFileError: the folder cannot be opened to lock it.
    """
    held = contextlib.ExitStack()
    try:
        held.enter_context(locks.holding_folder(root, exclusive=exclusive))
    except OSError as exc:
        raise CheckpointFileError(f"cannot open the project folder {root}: {exc.strerror}") from exc
    with held:
        yield


def read(root: str) -> Stored | None:
    """Read the checkpoint, falling back to the backup when the main file is missing or corrupt.

    Returns None when neither file exists: there is nothing to resume.

    Raises:
        CheckpointVersionError: the main file was written by a newer Checkpoint (the backup is not used).
        CheckpointFileError: a file exists but neither it nor the backup is a usable checkpoint.
    """
    main, backup = checkpoint_path(root), backup_path(root)
    main_bytes = _read_bytes(main)
    problem: str | None = None
    if main_bytes is not None:
        try:
            return Stored(_parse(main, main_bytes), from_backup=False)
        except CheckpointVersionError:
            raise
        except CheckpointFileError as exc:
            problem = f"{main} is unusable ({exc})"
    backup_bytes = _read_bytes(backup)
    if backup_bytes is None:
        if problem is None:
            return None
        raise CheckpointFileError(f"{problem}, and there is no backup {backup}")
    try:
        checkpoint = _parse(backup, backup_bytes)
    except CheckpointFileError as exc:
        if problem is None:
            problem = f"{main} is missing"
        raise CheckpointFileError(f"{problem}, and the backup is unusable too ({exc})") from exc
    reason = problem or f"{main} is missing"
    return Stored(checkpoint, from_backup=True, warnings=(f"Loaded the backup {backup}: {reason}.",))


def write(root: str, data: bytes) -> None:
    """Replace the checkpoint with ``data`` crash-safely, keeping the current one as backup if it is valid.

    Call it while holding ``locked(root, exclusive=True)``.

    Raises:
        CheckpointVersionError: the current file was written by a newer Checkpoint; nothing is written.
        CheckpointFileError: a file could not be written (permissions, disk full).
    """
    _remove_stale_temps(root)
    main = checkpoint_path(root)
    current = _read_bytes(main)
    if current is not None and _is_valid(main, current):
        _atomic_write(backup_path(root), current, point="save.backup")
    _atomic_write(main, data, point="save.main")


def _parse(path: str, data: bytes) -> model.Checkpoint:
    try:
        return model.parse(data)
    except CheckpointVersionError as exc:
        raise CheckpointVersionError(path, exc.found, exc.supported) from None


def _is_valid(path: str, data: bytes) -> bool:
    try:
        _parse(path, data)
    except CheckpointVersionError:
        raise
    except CheckpointFileError:
        return False
    return True


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointFileError(f"cannot read {path}: {exc.strerror}") from exc


def _atomic_write(path: str, data: bytes, *, point: str) -> None:
    import secrets  # saves only: `checkpoint brief` reads, and secrets imports hashlib, hmac and random

    folder = os.path.dirname(path)
    temp = os.path.join(folder, f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | files.BINARY, FILE_MODE)  # not inherited
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            files.sync(fd)
        finally:
            os.close(fd)
        debug.trigger(f"{point}.temp_written")
        os.replace(temp, path)
        debug.trigger(f"{point}.renamed")
        files.sync_folder(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise CheckpointFileError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _remove_stale_temps(root: str) -> None:
    """Temp files left by a save killed mid-write; safe to delete because saves hold the folder lock."""
    try:
        names = [name for name in os.listdir(root) if name.startswith(TEMP_PREFIX)]
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(root, name))
            _info("removed a temp file left by an interrupted save: %s", name)


def _info(message: str, *args: object) -> None:
    import logging  # only when there is something to log: loads never need the module

    logging.getLogger(__name__).info(message, *args)
