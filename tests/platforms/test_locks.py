"""File locks, both ways: ``flock`` (POSIX) and a byte-range lock on a lock file (Windows' way, which Linux takes
under CHECKPOINT_PORTABLE=1), each held by one open file and readable while held; a folder lock that adds no file
to the folder."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp.journal import owner_lock
from checkpoint_mcp.platforms import locks
from checkpoint_mcp.platforms.host import choose

WAYS = {"flock": choose("linux", {}), "range": choose("linux", {"CHECKPOINT_PORTABLE": "1"})}


@pytest.fixture(params=sorted(WAYS))
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(locks, "HOST", WAYS[request.param])
    return str(request.param)


@pytest.fixture
def lock_file(tmp_path: Path) -> str:
    path = str(tmp_path / "owner.lock")
    Path(path).write_bytes(b"")
    return path


def opened(path: str, flags: int = os.O_RDWR) -> int:
    return os.open(path, flags)


def test_an_exclusive_lock_excludes_a_second_open_file_even_in_the_same_process(way: str, lock_file: str) -> None:
    first, second = opened(lock_file), opened(lock_file)
    try:
        assert locks.take(first, exclusive=True, wait=False)
        assert not locks.take(second, exclusive=True, wait=False)
        assert not locks.take(second, exclusive=False, wait=False)
        locks.release(first)
        assert locks.take(second, exclusive=True, wait=False)
    finally:
        os.close(first)
        os.close(second)


def test_closing_the_holder_releases_the_lock_and_a_probe_on_another_open_file_does_not(
    way: str, lock_file: str
) -> None:
    holder = opened(lock_file)
    assert locks.take(holder, exclusive=True, wait=False)
    probe = opened(lock_file, os.O_RDONLY)
    os.close(probe)  # with POSIX record locks (per process) this close would have dropped the holder's lock
    other = opened(lock_file)
    try:
        assert not locks.take(other, exclusive=True, wait=False)
        os.close(holder)
        assert locks.take(other, exclusive=True, wait=False)
    finally:
        os.close(other)


def test_the_owner_details_are_readable_while_the_lock_is_held(way: str, lock_file: str) -> None:
    holder = opened(lock_file)
    try:
        assert locks.take(holder, exclusive=True, wait=False)
        details = {"pid": os.getpid(), "host": "here", "since": "now", "command": "checkpoint"}
        locks.write_details(holder, json.dumps(details).encode())
        owner = owner_lock.probe(lock_file)
        assert owner is not None
        assert (owner.pid, owner.host) == (os.getpid(), "here")
    finally:
        os.close(holder)
    assert owner_lock.probe(lock_file) is None


def test_only_the_range_way_lets_a_process_holding_flock_on_the_file_go_unnoticed(way: str, lock_file: str) -> None:
    """The two ways do not see each other: a portable proxy and a native one are not meant to share a journal."""
    holder = os.open(lock_file, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    other = opened(lock_file)
    try:
        assert locks.take(other, exclusive=True, wait=False) is (way == "range")
    finally:
        os.close(other)
        os.close(holder)


def test_a_folder_is_locked_by_a_file_in_the_user_state_folder_where_folders_cannot_be_locked(
    way: str, tmp_path: Path
) -> None:
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    environ = {"XDG_STATE_HOME": str(state)}
    with locks.holding_folder(str(project), exclusive=True, environ=environ):
        assert list(project.iterdir()) == []  # nothing added to the project, either way
        lock = Path(locks.folder_lock_path(str(project), environ))
        assert lock.exists() is (way == "range")
        holder = subprocess.run(
            [sys.executable, "-c", TRY_FOLDER, str(project), way, json.dumps(environ)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert holder.stdout.strip() == "busy"
    after = subprocess.run(
        [sys.executable, "-c", TRY_FOLDER, str(project), way, json.dumps(environ)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert after.stdout.strip() == "free"


TRY_FOLDER = """
import json, os, sys
from checkpoint_mcp.platforms import host, locks
folder, way, environ = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
locks.HOST = host.choose("linux", {"CHECKPOINT_PORTABLE": "1"} if way == "range" else {})
if way == "range":
    path = locks.folder_lock_path(folder, environ)
    fd = os.open(path, os.O_RDWR)
else:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
print("free" if locks.take(fd, exclusive=False, wait=False) else "busy")
"""
