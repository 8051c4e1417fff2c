"""Who holds a file: locks that go with the process holding them (SIGKILL included), taken two ways.

* ``Locks.FLOCK`` (POSIX): ``flock`` on the file itself, or on a folder (the session store locks the project
  folder and adds no file to it).
* ``Locks.RANGE`` (Windows, and Linux under ``CHECKPOINT_PORTABLE=1``): a lock on one byte at ``LOCK_OFFSET``
  of a lock file, through ``LockFileEx`` on Windows and an open file description lock (``F_OFD_SETLK``) on Linux:
  both are held by one open file, like ``flock``, so closing it releases the lock and a second open in the same
  process conflicts with it. Windows' locks are mandatory (a locked range cannot even be read), so the range
  lies past the owner's details, which stay readable at the start of the file (``read_details``). A folder
  cannot be locked this way: ``holding_folder`` locks a file named for it in the user's state folder.

A shared lock excludes only an exclusive one: a probe takes a shared lock, without waiting, to learn whether
someone holds the exclusive one (``take`` answers False), and drops it at once. A shared lock becomes exclusive
with ``take_alone``: atomically with open file description locks; ``flock`` and ``LockFileEx`` drop the shared lock
first, so a refused conversion takes it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Final

from checkpoint_mcp.platforms import files, paths
from checkpoint_mcp.platforms.host import HOST, Locks

LOCK_OFFSET: Final = 1 << 20
"""The byte a range lock covers: past anything written at the start of a lock file (the details)."""
DETAILS_LIMIT: Final = 1 << 12
"""The most bytes of details ``read_details`` reads."""


def take(fd: int, *, exclusive: bool, wait: bool) -> bool:
    """Lock the open file ``fd`` (exclusive: opened for writing); False if ``wait`` is False and another open file
    holds a lock that conflicts.

    Raises:
        OSError: the lock cannot be taken for another reason (a file system without locks).
    """
    if HOST.locks is Locks.RANGE:
        return _take_range(fd, exclusive, wait)
    return _flock(fd, exclusive, wait)


class LockLost(OSError):
    """A shared lock dropped to become exclusive could not be taken again: another took the file alone meanwhile."""


def take_alone(fd: int) -> bool:
    """Turn the shared lock this open file holds into an exclusive one, without waiting; False when another open
    file holds a lock too (the shared lock is kept).

    Raises:
        LockLost: the shared lock was dropped for the attempt (``flock``, ``LockFileEx``) and another took the file
            alone before it could be taken again.
        OSError: the lock cannot be changed for another reason.
    """
    if HOST.locks is Locks.RANGE and sys.platform != "win32":
        return _take_range(fd, True, False)  # F_OFD_SETLK replaces the read lock atomically, or leaves it
    if HOST.locks is Locks.RANGE:
        _release_range(fd)  # LockFileEx cannot convert a lock: it is given up, then asked for again
    if take(fd, exclusive=True, wait=False):
        return True
    if not take(fd, exclusive=False, wait=False):
        raise LockLost(f"the shared lock on file descriptor {fd} was lost to an exclusive one")
    return False


def release(fd: int) -> None:
    """Drop this open file's lock (closing it does too)."""
    if HOST.locks is Locks.RANGE:
        _release_range(fd)
    else:
        _unflock(fd)


def write_details(fd: int, data: bytes) -> None:
    """Replace what the lock file ``fd`` says of its holder (at most ``DETAILS_LIMIT`` bytes, before the range)."""
    if len(data) > DETAILS_LIMIT:
        raise ValueError(f"lock details take {len(data)} bytes, more than {DETAILS_LIMIT}")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_details(fd: int) -> bytes:
    """What the lock file ``fd`` says of its holder (readable while the lock is held, on every platform)."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, DETAILS_LIMIT)


@contextlib.contextmanager
def holding_folder(folder: str, *, exclusive: bool, environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Hold a lock on ``folder``, waiting for it: exclusive, or shared with other shared holders.

    With ``flock`` it is the folder's own; else a lock file in the user's state folder stands for it
    (``folder_lock_path``), so nothing is added to the folder and a read-only folder can still be locked.

    Raises:
        OSError: the folder (or its lock file) cannot be opened.
    """
    if HOST.locks is Locks.FLOCK:
        fd = os.open(folder, os.O_RDONLY | _DIRECTORY)
    else:
        path = folder_lock_path(folder, environ)
        os.makedirs(os.path.dirname(path), mode=files.FOLDER_MODE, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | files.BINARY, files.FILE_MODE)
    try:
        take(fd, exclusive=exclusive, wait=True)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def folder_lock_path(folder: str, environ: Mapping[str, str] = os.environ) -> str:
    """The lock file that stands for ``folder`` where folders cannot be locked: named for its real path."""
    digest = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:32]
    return os.path.join(paths.user_state(environ), "locks", f"{digest}.lock")


# ---- the primitives (each platform's own; which path runs is ``HOST.locks``) --------------------------------

if sys.platform == "win32":
    import msvcrt
    from typing import TYPE_CHECKING

    import pywintypes
    import win32con
    import win32file
    import winerror

    if TYPE_CHECKING:
        import _win32typing

    _DIRECTORY: Final = 0

    def _take_range(fd: int, exclusive: bool, wait: bool) -> bool:
        flags = (win32con.LOCKFILE_EXCLUSIVE_LOCK if exclusive else 0) | (
            0 if wait else win32con.LOCKFILE_FAIL_IMMEDIATELY
        )
        try:
            win32file.LockFileEx(msvcrt.get_osfhandle(fd), flags, 1, 0, _at_offset())
        except pywintypes.error as exc:
            if exc.winerror == winerror.ERROR_LOCK_VIOLATION:
                return False
            raise OSError(exc.winerror, exc.strerror) from exc
        return True

    def _release_range(fd: int) -> None:
        try:
            win32file.UnlockFileEx(msvcrt.get_osfhandle(fd), 1, 0, _at_offset())
        except pywintypes.error as exc:
            if exc.winerror != winerror.ERROR_NOT_LOCKED:
                raise OSError(exc.winerror, exc.strerror) from exc

    def _at_offset() -> _win32typing.PyOVERLAPPED:
        overlapped = pywintypes.OVERLAPPED()  # a fresh one per call: Windows forbids sharing one between calls
        overlapped.Offset = LOCK_OFFSET
        return overlapped

    def _flock(fd: int, exclusive: bool, wait: bool) -> bool:
        raise OSError("flock does not exist on Windows")

    def _unflock(fd: int) -> None:
        raise OSError("flock does not exist on Windows")

else:
    import fcntl
    import struct

    _DIRECTORY: Final = os.O_DIRECTORY

    def _flock(fd: int, exclusive: bool, wait: bool) -> bool:
        operation = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            return False
        return True

    def _unflock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    def _take_range(fd: int, exclusive: bool, wait: bool) -> bool:
        command = _OFD_SETLKW if wait else _OFD_SETLK
        try:
            fcntl.fcntl(fd, command, _flock_struct(fcntl.F_WRLCK if exclusive else fcntl.F_RDLCK))
        except BlockingIOError:
            return False
        except PermissionError:  # EACCES: what some systems answer for a conflicting lock
            return False
        return True

    def _release_range(fd: int) -> None:
        fcntl.fcntl(fd, _OFD_SETLK, _flock_struct(fcntl.F_UNLCK))

    def _flock_struct(kind: int) -> bytes:
        """A ``struct flock`` for one byte at ``LOCK_OFFSET`` (``l_pid`` 0, as open file description locks need)."""
        return struct.pack("@hhqqi4x", kind, os.SEEK_SET, LOCK_OFFSET, 1, 0)

    if sys.platform == "linux":
        _OFD_SETLK: Final = fcntl.F_OFD_SETLK
        _OFD_SETLKW: Final = fcntl.F_OFD_SETLKW
    else:
        _OFD_SETLK: Final = -1  # no open file description locks: ``host`` never chooses RANGE here
        _OFD_SETLKW: Final = -1
