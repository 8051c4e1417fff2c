"""Owner-only files and durable writes, as each platform allows.

Where mode bits mean something (POSIX), what names every call's arguments or holds a secret is created 0600 in
folders made 0700, whatever the umask, and an existing file open to others is reported. Windows reports 0666 for
every file it can write: there a file takes the ACL of its folder (the user's profile keeps its own folders
private), nothing is chmodded and nothing is reported.

Durability: ``sync`` reaches the disk. On macOS ``fsync`` only hands the data to the drive, which may keep it in
its cache across a power loss; ``F_FULLFSYNC`` flushes that too (SQLite's ``PRAGMA fullfsync`` does the same for
the journal: ``host.HOST.full_fsync``). A rename is made durable by syncing its folder (``sync_folder``), which
Windows cannot open: there NTFS journals the rename itself.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Final

from checkpoint_mcp.platforms.host import HOST

FILE_MODE: Final = 0o600
FOLDER_MODE: Final = 0o700
_CANNOT_SYNC_FOLDER: Final = (errno.EINVAL, errno.ENOTSUP, errno.EBADF)


def restrict(fd: int, mode: int = FILE_MODE) -> None:
    """Set the open file ``fd``'s mode bits (a umask only takes bits away; one that takes the owner's would lock
    them out); nothing where mode bits mean nothing."""
    if HOST.modes:
        _fchmod(fd, mode)


def restrict_path(path: str, mode: int = FOLDER_MODE) -> None:
    """Set ``path``'s mode bits, as ``restrict`` does.

    Raises:
        OSError: it cannot be changed.
    """
    if HOST.modes:
        os.chmod(path, mode)


def make_owner_only_folder(path: str) -> None:
    """Create ``path`` owner-only (whatever the umask) unless it exists; an existing one is left as it is.

    Raises:
        OSError: it cannot be created.
    """
    try:
        os.mkdir(path, FOLDER_MODE)
    except FileExistsError:
        return
    restrict_path(path, FOLDER_MODE)


def open_to_others(path: str) -> int | None:
    """``path``'s mode bits when group or others may read or write it and that means something; else None."""
    if not HOST.modes:
        return None
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return None  # gone, or not ours to stat: opening it reports that
    return mode if mode & 0o077 else None


def sync(fd: int) -> None:
    """Make what was written to ``fd`` durable: on the disk, not in its cache.

    Raises:
        OSError: it cannot be synced.
    """
    if HOST.full_fsync:
        try:
            _full_fsync(fd)
            return
        except OSError:
            pass  # a file system without F_FULLFSYNC (a network share): fsync is what it offers
    os.fsync(fd)


def sync_folder(folder: str) -> None:
    """Make a rename in ``folder`` durable (nothing on Windows, whose folders cannot be opened to sync).

    Raises:
        OSError: the folder cannot be opened, or syncing it failed for another reason than that its file system
            cannot sync a folder (the rename is then as durable as it allows).
    """
    if not HOST.sync_folders:
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        sync(fd)
    except OSError as exc:
        if exc.errno not in _CANNOT_SYNC_FOLDER:
            raise
    finally:
        os.close(fd)


if sys.platform == "win32":
    BINARY: Final = os.O_BINARY
    """For ``os.open``: Windows opens files in text mode (LF written as CRLF) unless told otherwise."""

    def _fchmod(fd: int, mode: int) -> None:
        pass  # not reached: HOST.modes is False on Windows

    def _full_fsync(fd: int) -> None:
        os.fsync(fd)

else:
    import fcntl

    BINARY: Final = 0
    """For ``os.open``: POSIX has no text mode."""

    def _fchmod(fd: int, mode: int) -> None:
        os.fchmod(fd, mode)

    if sys.platform == "darwin":

        def _full_fsync(fd: int) -> None:
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)

    else:

        def _full_fsync(fd: int) -> None:
            os.fsync(fd)
