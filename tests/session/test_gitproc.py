"""Git commands run in the background: exact output (carriage returns in names included), big inputs and
outputs at once, timeouts and cancellation that leave no child behind, closed standard streams."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_mcp.errors import GitError
from checkpoint_mcp.session import git as gitfacts
from checkpoint_mcp.session import gitproc, service
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .helpers import write


def _children() -> set[int]:
    """This process's live or unreaped child processes (a test compares them with those it started with:
    fixtures of other tests, a PostgreSQL server say, may be children too)."""
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as listing:
            pids.update(int(pid) for pid in listing.read().split())
    return pids


def _slow_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    slow = bin_dir / "git"
    slow.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))


def test_output_is_git_s_bytes_decoded_carriage_returns_included(repo: Path) -> None:
    write(repo, "odd\rname.txt", "x\n")
    write(repo, "crlf.txt", "a\r\nb\r\n")
    args = ["status", "--porcelain=v2", "-z", "--untracked-files=all"]

    ours = gitproc.Started(str(repo), args).wait()
    theirs = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=False)

    assert ours == (theirs.returncode, theirs.stdout.decode("utf-8", "surrogateescape"))
    assert "odd\rname.txt" in ours[1]


def test_a_file_whose_name_holds_a_carriage_return_is_recorded_and_its_changes_flagged(repo: Path) -> None:
    root = ProjectRoot(str(repo), RootSource.ARGUMENT)
    write(repo, "odd\rname.txt", "x\n")
    saved = service.save(SaveRequest(goal="Odd names"), root)
    assert "odd\rname.txt" in [f.path for f in saved.checkpoint.modified_files]
    write(repo, "odd\rname.txt", "changed\n")
    loaded = service.load(root)
    assert loaded.drift is not None
    assert "odd\rname.txt" in loaded.drift.changed_since


def test_a_failing_command_gives_its_status_and_stderr(repo: Path) -> None:
    code, output = gitproc.Started(str(repo), ["rev-parse", "--verify", "no-such-ref"]).wait()

    assert code != 0
    assert "fatal" in output or "no-such-ref" in output


def test_inputs_and_outputs_bigger_than_a_pipe_flow_both_ways_at_once(repo: Path) -> None:
    names = [f"{'deep/' * 20}file-{i:05}-{'x' * 40}.txt" for i in range(1500)]  # ~225 KB of paths in
    for name in names:
        write(repo, name, f"{name}\n")

    hashes = gitfacts.hash_files(str(repo), names)  # ~60 KB of hashes out, while the paths go in

    assert len(hashes) == len(names)
    sample = subprocess.run(
        ["git", "hash-object", names[777]], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert hashes[names[777]] == sample


def test_a_command_past_its_timeout_is_killed_and_reaped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _children()
    _slow_git(tmp_path, monkeypatch)
    started = time.monotonic()

    with pytest.raises(GitError, match=r"`git status` did not finish within 0\.2 seconds"):
        gitproc.Started(str(repo), ["status"], timeout=0.2).wait()

    assert time.monotonic() - started < 5
    assert _children() <= before


def test_a_timed_out_snapshot_leaves_no_child_behind(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _children()
    _slow_git(tmp_path, monkeypatch)
    monkeypatch.setattr(gitfacts, "GIT_TIMEOUT_SECONDS", 0.2)

    with pytest.raises(GitError, match=r"`git rev-parse` did not finish"):
        gitfacts.snapshot(str(repo))

    assert _children() <= before


def test_cancel_kills_a_running_command_and_its_outcome_is_an_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _children()
    _slow_git(tmp_path, monkeypatch)
    run = gitproc.SnapshotRun(str(repo))

    run.cancel()

    assert _children() <= before
    assert run.in_work_tree() is False
    with pytest.raises(GitError, match="was cancelled"):
        run.prefix()


def test_an_outcome_is_collected_once_and_kept(repo: Path) -> None:
    run = gitproc.SnapshotRun(str(repo))

    assert run.prefix() == ""
    run.cancel()

    assert run.prefix() == ""
    assert run.in_work_tree() is True


def test_a_missing_git_is_reported_when_collected_not_when_started(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    started = gitproc.Started(str(repo), ["status"])

    with pytest.raises(GitError, match="git is not installed or not on PATH"):
        started.wait()


def test_git_runs_with_closed_standard_streams(repo: Path) -> None:
    code = (
        "import os, sys\n"
        "os.close(0)\n"
        "from checkpoint_mcp.session import git\n"
        "hashes = git.hash_files(sys.argv[1], ['a.txt'])\n"
        "sys.stderr.write(hashes['a.txt'])\n"
    )
    write(repo, "a.txt", "a\n")

    done = subprocess.run(
        [sys.executable, "-c", code, str(repo)], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 0, done.stderr
    assert (
        done.stderr
        == subprocess.run(
            ["git", "hash-object", "a.txt"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
