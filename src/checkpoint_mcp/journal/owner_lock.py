"""Who owns a workflow of an SQLite journal: the lock file a live proxy holds, and how to probe it without taking it.

A proxy owns a workflow lineage by holding an exclusive lock on ``<journal>.owners/<digest>.lock`` (the digest:
32 hex digits of the SHA-256 of the lineage's root id), with who it is written at the start of the file as JSON. The
lock goes with the process, SIGKILL included; how it is taken is the platform's (``platforms.locks``). ``SqliteJournal``
takes it; ``probe`` tells, from any process, whether someone holds it (a shared-lock attempt fails only while the
exclusive one is held), and the resume brief's digest reads it the same way. Only the standard library and the
platform seams: `checkpoint brief` imports this on its fast path.

The same file is held *shared* by every proxy whose calls are identified by content: any number of them share the
workflow, and none can own it alone while another does (docs/sessions.md). ``probe`` sees only an exclusive owner.
Each such proxy also holds a lock of its own, its *presence* (``presence_path``): the calls it left PENDING are in
flight while it is held, in doubt once it is not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

from checkpoint_mcp.clock import utc_now
from checkpoint_mcp.journal.base import OwnerInfo
from checkpoint_mcp.platforms import files, locks

STARTING_UP = OwnerInfo(0, "?", "", "starting up")
"""What ``probe`` says of a lock held by a process that has not yet written who it is."""

PRESENCE = "\0replica "
"""How a presence's lock is named (``presence_root``): no workflow id holds a NUL, so none can take its lock."""


def owners_folder(journal_path: str) -> str:
    """The folder of a journal's ownership locks."""
    return journal_path + ".owners"


def lock_path(journal_path: str, root: str) -> str:
    """The ownership lock of the lineage rooted at ``root`` in the journal at ``journal_path``."""
    digest = hashlib.sha256(root.encode()).hexdigest()[:32]
    return os.path.join(owners_folder(journal_path), f"{digest}.lock")


def presence_root(replica_id: str) -> str:
    """The name whose lock is the presence of the replica ``replica_id`` (``lock_path`` hashes it)."""
    return PRESENCE + replica_id


def presence_path(journal_path: str, replica_id: str) -> str:
    """The lock a live replica (a proxy sharing workflows) holds for as long as it lives."""
    return lock_path(journal_path, presence_root(replica_id))


def write_owner(fd: int, root: str, command: str, shares: list[str] | None = None) -> None:
    """Write who holds the lock ``fd`` into it (``read_owner`` reads it); ``shares``: the lineages a presence shares
    (``sharers`` finds them)."""
    info: dict[str, object] = {
        "workflow": root,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": utc_now(),
        "command": command,
    }
    if shares is not None:
        info["shares"] = shares
    locks.write_details(fd, json.dumps(info).encode())


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


def sharers(journal_path: str, root: str) -> list[OwnerInfo]:
    """The live replicas that share the lineage rooted at ``root`` (their presences name it), by reading every lock
    of the journal's folder; none taken."""
    found: list[OwnerInfo] = []
    for path, details in _locks_of(journal_path):
        if root in details.get("shares", ()):
            owner = probe(path)
            if owner is not None:
                found.append(owner)
    return found


def prune_presences(journal_path: str, stale_seconds: float) -> None:
    """Remove the presence locks of replicas that died without closing (SIGKILL): unheld, and older than
    ``stale_seconds``, so never the lock of a replica that is starting (it takes its lock at once)."""
    now = time.time()
    for path, details in _locks_of(journal_path):
        workflow = details.get("workflow")
        if not isinstance(workflow, str) or not workflow.startswith(PRESENCE):
            continue
        with contextlib.suppress(OSError):
            if now - os.stat(path).st_mtime >= stale_seconds and probe(path) is None:
                os.unlink(path)


def _locks_of(journal_path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each lock of the journal's folder with what its holder wrote (those that cannot be read are skipped)."""
    folder = owners_folder(journal_path)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as handle:
                details = json.loads(handle.read(locks.DETAILS_LIMIT) or b"{}")
        except (OSError, ValueError):
            continue
        if isinstance(details, dict):
            yield path, details
