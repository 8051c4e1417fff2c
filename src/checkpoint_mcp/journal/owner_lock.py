"""Who owns a workflow of an SQLite journal: the lock file a live proxy holds, and how to probe it without taking it.

A proxy owns a workflow lineage by holding an exclusive lock on ``<journal>.owners/<digest>.lock`` (the digest:
32 hex digits of the SHA-256 of the lineage's root id), with who it is written at the start of the file as JSON. The
lock goes with the process, SIGKILL included; how it is taken is the platform's (``platforms.locks``). ``SqliteJournal``
takes it; ``probe`` tells, from any process, whether someone holds it (a shared-lock attempt fails only while the
exclusive one is held), and the resume brief's digest reads it the same way. Only the standard library and the
platform seams: `checkpoint brief` imports this on its fast path.
"""

from __future__ import annotations

import hashlib
import json
import os

from checkpoint_mcp.journal.base import OwnerInfo
from checkpoint_mcp.platforms import files, locks

STARTING_UP = OwnerInfo(0, "?", "", "starting up")
"""What ``probe`` says of a lock held by a process that has not yet written who it is."""


def owners_folder(journal_path: str) -> str:
    """The folder of a journal's ownership locks."""
    return journal_path + ".owners"


def lock_path(journal_path: str, root: str) -> str:
    """The ownership lock of the lineage rooted at ``root`` in the journal at ``journal_path``."""
    digest = hashlib.sha256(root.encode()).hexdigest()[:32]
    return os.path.join(owners_folder(journal_path), f"{digest}.lock")


def read_owner(fd: int) -> OwnerInfo | None:
    """Who wrote themselves into the open lock file ``fd`` (None: nothing readable there yet)."""
    try:
        data = json.loads(locks.read_details(fd) or b"null")
        return OwnerInfo(int(data["pid"]), str(data["host"]), str(data["since"]), str(data.get("command", "")))
    except (ValueError, TypeError, KeyError, OSError):
        return None


def probe(path: str) -> OwnerInfo | None:
    """The live owner of the lock at ``path`` (``STARTING_UP`` while it has not written who it is), or None when
    nobody holds it or it does not exist; never creates or takes it."""
    try:
        fd = os.open(path, os.O_RDONLY | files.BINARY)
    except OSError:
        return None
    try:
        if not locks.take(fd, exclusive=False, wait=False):
            return read_owner(fd) or STARTING_UP
        locks.release(fd)
        return None
    finally:
        os.close(fd)
