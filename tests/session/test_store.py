"""The checkpoint files on disk: owner-only atomic writes, the backup, and falling back to it."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp.errors import CheckpointFileError, CheckpointVersionError
from checkpoint_mcp.session import model, store


def _checkpoint(goal: str) -> bytes:
    checkpoint = model.Checkpoint(
        id="id-1",
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        project_name="p",
        goal=goal,
    )
    return model.serialize(checkpoint)


def _goal(data: bytes) -> str:
    return model.parse(data).goal


def test_a_write_creates_an_owner_only_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store.write(str(tmp_path), _checkpoint("first"))

    main = tmp_path / ".claude-checkpoint"
    assert stat.S_IMODE(main.stat().st_mode) == 0o600
    assert _goal(main.read_bytes()) == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".claude-checkpoint"]


def test_each_write_keeps_the_previous_valid_checkpoint_as_the_backup(tmp_path: Path) -> None:
    store.write(str(tmp_path), _checkpoint("first"))
    store.write(str(tmp_path), _checkpoint("second"))

    backup = tmp_path / ".claude-checkpoint.prev"
    assert _goal(backup.read_bytes()) == "first"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    stored = store.read(str(tmp_path))
    assert stored is not None
    assert (stored.checkpoint.goal, stored.from_backup, stored.warnings) == ("second", False, ())


def test_nothing_to_read_is_not_an_error(tmp_path: Path) -> None:
    assert store.read(str(tmp_path)) is None


def test_a_corrupt_main_file_falls_back_to_the_backup_and_says_so(tmp_path: Path) -> None:
    store.write(str(tmp_path), _checkpoint("good"))
    store.write(str(tmp_path), _checkpoint("newer"))
    (tmp_path / ".claude-checkpoint").write_bytes(b'{"version": 1, "id": "torn')

    stored = store.read(str(tmp_path))

    assert stored is not None
    assert (stored.checkpoint.goal, stored.from_backup) == ("good", True)
    (warning,) = stored.warnings
    assert "Loaded the backup" in warning
    assert "is unusable (not valid JSON" in warning


def test_a_missing_main_file_falls_back_to_the_backup(tmp_path: Path) -> None:
    (tmp_path / ".claude-checkpoint.prev").write_bytes(_checkpoint("kept"))

    stored = store.read(str(tmp_path))

    assert stored is not None
    assert stored.from_backup
    assert "is missing" in stored.warnings[0]


def test_a_corrupt_main_file_never_overwrites_a_good_backup(tmp_path: Path) -> None:
    store.write(str(tmp_path), _checkpoint("good"))
    store.write(str(tmp_path), _checkpoint("newer"))
    (tmp_path / ".claude-checkpoint").write_bytes(b"garbage")
    backup_before = (tmp_path / ".claude-checkpoint.prev").read_bytes()

    store.write(str(tmp_path), _checkpoint("after"))

    assert (tmp_path / ".claude-checkpoint.prev").read_bytes() == backup_before
    assert _goal((tmp_path / ".claude-checkpoint").read_bytes()) == "after"


def test_a_corrupt_main_file_without_a_backup_is_an_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / ".claude-checkpoint").write_bytes(b"{}")

    with pytest.raises(CheckpointFileError, match=r"\.claude-checkpoint is unusable .* and there is no backup"):
        store.read(str(tmp_path))


def test_when_both_files_are_corrupt_the_error_names_both_problems(tmp_path: Path) -> None:
    (tmp_path / ".claude-checkpoint").write_bytes(b"{}")
    (tmp_path / ".claude-checkpoint.prev").write_bytes(b"[")

    with pytest.raises(CheckpointFileError, match="and the backup is unusable too"):
        store.read(str(tmp_path))


def test_a_newer_version_is_refused_and_never_replaced_by_the_backup_or_a_write(tmp_path: Path) -> None:
    store.write(str(tmp_path), _checkpoint("old"))
    newer = json.loads(_checkpoint("from the future")) | {"version": 9}
    data = json.dumps(newer).encode()
    (tmp_path / ".claude-checkpoint").write_bytes(data)

    with pytest.raises(CheckpointVersionError, match=r"\.claude-checkpoint has checkpoint version 9"):
        store.read(str(tmp_path))
    with pytest.raises(CheckpointVersionError):
        store.write(str(tmp_path), _checkpoint("overwrite attempt"))

    assert (tmp_path / ".claude-checkpoint").read_bytes() == data


def test_temp_files_left_by_an_interrupted_save_are_removed_by_the_next_write(tmp_path: Path) -> None:
    leftover = tmp_path / ".claude-checkpoint.tmp-4242-deadbeef"
    leftover.write_bytes(b"half")

    store.write(str(tmp_path), _checkpoint("next"))

    assert not leftover.exists()


def test_a_failed_write_reports_the_path_and_leaves_the_old_file(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores folder permissions, so make the target a folder instead: rename onto it fails.
        (tmp_path / ".claude-checkpoint").mkdir()
        with pytest.raises(CheckpointFileError, match=r"cannot (read|write) .*\.claude-checkpoint"):
            store.write(str(tmp_path), _checkpoint("x"))
        return
    store.write(str(tmp_path), _checkpoint("old"))
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(CheckpointFileError, match="cannot write"):
            store.write(str(tmp_path), _checkpoint("new"))
    finally:
        tmp_path.chmod(0o700)
    assert _goal((tmp_path / ".claude-checkpoint").read_bytes()) == "old"


def test_a_save_holds_an_exclusive_lock_on_the_project_folder(tmp_path: Path) -> None:
    holder_code = (
        "import sys\n"
        "from checkpoint_mcp.session import store\n"
        "with store.locked(sys.argv[1], exclusive=True):\n"
        "    print('locked', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder_code, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "locked"
            fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            finally:
                os.close(fd)
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
        assert holder.wait(timeout=10) == 0


def test_checkpoint_files_are_told_apart_from_project_files() -> None:
    own = [".claude-checkpoint", ".claude-checkpoint.prev", ".claude-checkpoint.tmp-1-ab"]
    assert all(store.is_checkpoint_file(name) for name in own)
    assert not any(store.is_checkpoint_file(n) for n in ("src/.claude-checkpoint", ".claude-checkpoints", "a"))


def test_the_stored_checkpoint_round_trips_through_the_file(tmp_path: Path, spec_checkpoint: bytes) -> None:
    original = model.parse(spec_checkpoint)
    store.write(str(tmp_path), model.serialize(original))

    stored = store.read(str(tmp_path))

    assert stored is not None
    assert dataclasses.asdict(stored.checkpoint) == dataclasses.asdict(original)
