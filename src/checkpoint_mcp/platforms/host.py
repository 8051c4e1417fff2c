"""Which path each platform seam takes on this machine: the one place that asks which platform this is.

Linux takes its native paths (a keeper process that is a child subreaper, pidfds, the event loop watching pipes
and signals, ``flock``); macOS and the BSDs share most of them but have no subreaper (the upstream's process
group and a watchdog instead) and need ``F_FULLFSYNC`` for durability; Windows has none of them (a Job Object,
threads pumping pipes, ``signal.signal``, byte-range locks on lock files, no mode bits, ``cmd.exe``).

``CHECKPOINT_PORTABLE=1`` makes Linux take the macOS and Windows paths wherever they can run here: the process
group and its watchdog, threads for pipes and signals, byte-range locks on lock files (open file description
locks, which behave as Windows' ``LockFileEx`` does: held by one open file, not one process). What cannot run
here (a Job Object, ``cmd.exe``, Windows' absent mode bits) keeps the Linux path, and is tested against fakes.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

PORTABLE_ENV: Final = "CHECKPOINT_PORTABLE"


class Tree(enum.Enum):
    """How the upstream's process tree is kept whole, and taken down with the proxy however the proxy dies."""

    KEEPER = "keeper"  # Linux: a forked keeper, child subreaper with a parent-death signal (upstream/stdio/keeper.py)
    GROUP = "group"  # macOS, BSD: the shell's own process group, and a watchdog that outlives the proxy (group.py)
    JOB = "job"  # Windows: a Job Object that kills every member when its last handle closes (job.py)


class Locks(enum.Enum):
    """How a process holds a file against others."""

    FLOCK = "flock"  # ``flock`` on the file (or the folder) itself: POSIX
    RANGE = "range"  # a byte-range lock on a lock file, past the owner's details: Windows (LockFileEx), portable Linux


@dataclass(frozen=True)
class Host:
    """The path each seam takes."""

    platform: str
    """``sys.platform``, for what is per platform but not a seam (where a client keeps its files)."""
    portable: bool
    """``CHECKPOINT_PORTABLE=1`` was set."""
    tree: Tree
    pidfd: bool
    """The exit of a child is watched by the loop through a pidfd (Linux), else by a thread."""
    loop_pipes: bool
    """The event loop watches pipes (POSIX); else a thread per pipe end pumps it (``stdio``)."""
    loop_signals: bool
    """``loop.add_signal_handler`` (POSIX); else ``signal.signal`` and ``call_soon_threadsafe`` (``signals``)."""
    locks: Locks
    modes: bool
    """File mode bits mean something (POSIX): owner-only files are made and checked; Windows reports 0666 for
    every file it can write and relies on the user profile's ACL instead."""
    sync_folders: bool
    """A folder can be opened and synced, which makes a rename in it durable (POSIX); NTFS journals the rename."""
    full_fsync: bool
    """``fsync`` does not reach the disk (macOS): ``F_FULLFSYNC``, and SQLite's ``PRAGMA fullfsync``."""
    windows_commands: bool
    """``cmd.exe`` runs ``--upstream-cmd`` and command strings are quoted for Windows programs."""


def choose(platform: str, environ: Mapping[str, str]) -> Host:
    """The paths for ``platform`` (a ``sys.platform`` value), under ``environ``'s ``CHECKPOINT_PORTABLE``."""
    portable = environ.get(PORTABLE_ENV, "") == "1"
    windows = platform == "win32"
    linux = platform.startswith("linux")
    native_linux = linux and not portable
    if windows:
        tree = Tree.JOB
    elif native_linux:
        tree = Tree.KEEPER
    else:
        tree = Tree.GROUP
    return Host(
        platform=platform,
        portable=portable,
        tree=tree,
        pidfd=native_linux,
        loop_pipes=not windows and not portable,
        loop_signals=not windows and not portable,
        locks=Locks.RANGE if windows or (linux and portable) else Locks.FLOCK,
        modes=not windows,
        sync_folders=not windows,
        full_fsync=platform == "darwin",
        windows_commands=windows,
    )


HOST: Final = choose(sys.platform, os.environ)
"""This process's paths, chosen once at import."""
