"""Git facts against real repositories: statuses, blob hashes equal to `git hash-object`, and drift."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from checkpoint_mcp.errors import GitError
from checkpoint_mcp.session import git as gitfacts
from checkpoint_mcp.session.git import StatusEntry
from checkpoint_mcp.session.model import FileEntry

from .conftest import Git
from .helpers import write


def _statuses(root: Path) -> dict[str, str]:
    snapshot = gitfacts.snapshot(str(root))
    assert snapshot is not None
    return {e.path: e.status for e in snapshot.entries}


def test_the_git_timeout_is_three_seconds() -> None:
    assert gitfacts.GIT_TIMEOUT_SECONDS == 3.0


def test_a_folder_outside_any_repository_has_no_git_facts(tmp_path: Path) -> None:
    assert gitfacts.snapshot(str(tmp_path)) is None
    assert not gitfacts.in_work_tree(str(tmp_path))
    assert gitfacts.is_ignored(str(tmp_path), ".claude-checkpoint") is None


def test_before_the_first_commit_files_are_listed_but_there_are_no_git_facts(tmp_path: Path, git: Git) -> None:
    git(tmp_path, "init", "-q")
    write(tmp_path, "a.txt", "a\n")

    snapshot = gitfacts.snapshot(str(tmp_path))

    assert snapshot is not None
    assert snapshot.head is None
    assert snapshot.facts is None
    assert snapshot.entries == (StatusEntry("a.txt", "??"),)


def test_every_kind_of_uncommitted_change_gets_its_porcelain_code(repo: Path, git: Git) -> None:
    for name in ("modified.txt", "deleted.txt", "old-name.txt", "staged.txt"):
        write(repo, name, f"{name}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "files")
    write(repo, "modified.txt", "changed\n")
    (repo / "deleted.txt").unlink()
    git(repo, "mv", "old-name.txt", "new-name.txt")
    write(repo, "staged.txt", "staged change\n")
    git(repo, "add", "staged.txt")
    write(repo, "added.txt", "new\n")
    git(repo, "add", "added.txt")
    write(repo, "new-dir/deep/untracked.txt", "u\n")
    write(repo, ".claude-checkpoint.tmp-1-ab", "own temp file\n")

    snapshot = gitfacts.snapshot(str(repo))

    assert snapshot is not None
    assert {e.path: e.status for e in snapshot.entries} == {
        "modified.txt": "M",
        "deleted.txt": "D",
        "new-name.txt": "R",
        "staged.txt": "M",
        "added.txt": "A",
        "new-dir/deep/untracked.txt": "??",
    }
    assert snapshot.branch == "main"
    assert snapshot.head == git(repo, "rev-parse", "HEAD").strip()
    assert snapshot.facts is not None
    assert snapshot.facts.dirty


def test_a_clean_work_tree_is_not_dirty(repo: Path) -> None:
    snapshot = gitfacts.snapshot(str(repo))

    assert snapshot is not None
    assert snapshot.facts is not None
    assert snapshot.entries == ()
    assert not snapshot.facts.dirty


def test_a_detached_head_has_no_branch(repo: Path, git: Git) -> None:
    git(repo, "checkout", "-q", "--detach")

    snapshot = gitfacts.snapshot(str(repo))

    assert snapshot is not None
    assert snapshot.branch is None
    assert snapshot.head is not None


def test_a_root_in_a_subfolder_sees_only_its_own_files_relative_to_itself(repo: Path, git: Git) -> None:
    write(repo, "packages/app/src/a.ts", "a\n")
    write(repo, "packages/other/b.ts", "b\n")
    write(repo, "top.txt", "t\n")

    assert _statuses(repo / "packages" / "app") == {"src/a.ts": "??"}


def test_blob_hashes_equal_git_hash_object_including_gitattributes_filters(repo: Path, git: Git) -> None:
    write(repo, ".gitattributes", "*.txt text eol=lf\n")
    (repo / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    write(repo, "plain.bin", "\x00binary\n")
    write(repo, "with space é.md", "unicode name\n")
    names = ["crlf.txt", "plain.bin", "with space é.md"]

    hashes = gitfacts.hash_files(str(repo), names)

    for name in names:
        assert hashes[name] == git(repo, "hash-object", "--", name).strip()
    raw = (repo / "crlf.txt").read_bytes()
    assert hashes["crlf.txt"] != hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


def test_missing_files_folders_and_broken_links_get_no_hash(repo: Path) -> None:
    (repo / "folder").mkdir()
    (repo / "broken").symlink_to(repo / "nowhere")

    assert gitfacts.hash_files(str(repo), ["missing.txt", "folder", "broken"]) == {}


def test_is_ignored_follows_gitignore(repo: Path) -> None:
    assert gitfacts.is_ignored(str(repo), ".claude-checkpoint") is True
    assert gitfacts.is_ignored(str(repo), "src/app.ts") is False


@pytest.fixture
def git_spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that logs its arguments and GIT_OPTIONAL_LOCKS, then runs the real git."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "spy-bin"
    bin_dir.mkdir()
    log = tmp_path / "git.log"
    spy = bin_dir / "git"
    spy.write_text(f'#!/bin/sh\nprintf "%s|%s\\n" "$GIT_OPTIONAL_LOCKS" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    spy.chmod(spy.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def test_git_runs_without_a_shell_and_without_optional_locks(repo: Path, git_spy: Path) -> None:
    write(repo, "file; echo pwned.txt", "x\n")

    snapshot = gitfacts.snapshot(str(repo))
    gitfacts.hash_files(str(repo), ["file; echo pwned.txt"])

    assert snapshot is not None
    assert snapshot.entries == (StatusEntry("file; echo pwned.txt", "??"),)
    lines = git_spy.read_text().splitlines()
    assert lines, "the spy saw no git call"
    assert all(line.startswith("0|") for line in lines)
    assert any("status --porcelain=v2 -z" in line for line in lines)


def test_a_git_that_hangs_is_abandoned_after_the_timeout(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    slow = bin_dir / "git"
    slow.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(gitfacts, "GIT_TIMEOUT_SECONDS", 0.2)

    with pytest.raises(GitError, match=r"`git rev-parse` did not finish within 0\.2 seconds"):
        gitfacts.snapshot(str(repo))


def test_a_missing_git_is_a_clear_error(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    with pytest.raises(GitError, match="git is not installed or not on PATH"):
        gitfacts.snapshot(str(repo))


# --- drift ------------------------------------------------------------------------------------------------


def _saved(root: Path) -> tuple[gitfacts.Snapshot, tuple[FileEntry, ...]]:
    """What a save records: the snapshot and every dirty file with its hash."""
    snapshot = gitfacts.snapshot(str(root))
    assert snapshot is not None
    assert snapshot.facts is not None
    hashes = gitfacts.hash_files(str(root), [e.path for e in snapshot.entries])
    files = tuple(FileEntry(e.path, e.status, "git", hash=hashes.get(e.path)) for e in snapshot.entries)
    return snapshot, files


def _drift(root: Path, snapshot: gitfacts.Snapshot, files: tuple[FileEntry, ...]) -> gitfacts.Drift:
    assert snapshot.facts is not None
    drift = gitfacts.drift(str(root), snapshot.facts, files)
    assert drift is not None
    return drift


@pytest.fixture
def auth_repo(repo: Path, git: Git) -> Path:
    """The spec's scenario at save time: two committed files edited, one new untracked test file."""
    write(repo, "src/auth/session.ts", "export const session = 1\n")
    write(repo, "src/auth/callback.ts", "export const callback = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "auth")
    write(repo, "src/auth/session.ts", "export const session = 2\n")
    write(repo, "src/auth/callback.ts", "export const callback = 2\n")
    write(repo, "src/auth/session.spec.ts", "test('cookie')\n")
    return repo


def test_nothing_changed_means_no_commits_and_no_changed_files(auth_repo: Path) -> None:
    drift = _drift(auth_repo, *_saved(auth_repo))

    assert (drift.commits_since, drift.changed_since, drift.branch_changed) == (0, (), False)


def test_a_file_committed_unchanged_is_not_flagged_but_an_edited_one_is(auth_repo: Path, git: Git) -> None:
    saved = _saved(auth_repo)
    git(auth_repo, "commit", "-qm", "callback", "src/auth/callback.ts")
    write(auth_repo, "src/auth/session.ts", "teammate edit\n")

    drift = _drift(auth_repo, *saved)

    assert drift.commits_since == 1
    assert drift.changed_since == ("src/auth/session.ts",)


def test_files_changed_after_the_checkpoint_are_flagged_even_if_not_recorded(auth_repo: Path, git: Git) -> None:
    saved = _saved(auth_repo)
    write(auth_repo, "README.md", "new untracked file\n")
    write(auth_repo, ".gitignore", ".claude-checkpoint*\nnode_modules/\n")
    (auth_repo / "src" / "auth" / "session.spec.ts").unlink()

    drift = _drift(auth_repo, *saved)

    assert drift.changed_since == (".gitignore", "README.md", "src/auth/session.spec.ts")


def test_files_changed_by_new_commits_are_flagged_and_an_edit_undone_is_not(repo: Path, git: Git) -> None:
    write(repo, "a.txt", "a\n")
    write(repo, "b.txt", "b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ab")
    saved = _saved(repo)
    write(repo, "a.txt", "a changed and committed\n")
    git(repo, "commit", "-qam", "change a")
    write(repo, "b.txt", "b edited\n")
    write(repo, "b.txt", "b\n")

    drift = _drift(repo, *saved)

    assert (drift.commits_since, drift.changed_since) == (1, ("a.txt",))


def test_switching_branches_is_reported(auth_repo: Path, git: Git) -> None:
    saved = _saved(auth_repo)
    git(auth_repo, "checkout", "-q", "-b", "other")

    drift = _drift(auth_repo, *saved)

    assert drift.branch_changed
    assert (drift.saved_branch, drift.current_branch) == ("main", "other")


def test_a_saved_commit_rewritten_away_is_reported_unreachable(repo: Path, git: Git) -> None:
    write(repo, "a.txt", "a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "to be amended")
    saved = _saved(repo)
    git(repo, "commit", "-q", "--amend", "-m", "amended")

    drift = _drift(repo, *saved)

    assert drift.commits_since is None
    assert drift.changed_since == ()


def test_a_saved_commit_that_no_longer_exists_still_flags_recorded_files(repo: Path, git: Git) -> None:
    write(repo, "a.txt", "a\n")
    saved_snapshot, files = _saved(repo)
    assert saved_snapshot.facts is not None
    gone = gitfacts.Snapshot(branch="main", head="f" * 40, entries=saved_snapshot.entries)
    write(repo, "a.txt", "a edited\n")

    drift = _drift(repo, gone, files)

    assert drift.commits_since is None
    assert drift.changed_since == ("a.txt",)


def test_drift_is_none_when_the_project_is_no_longer_a_repository(auth_repo: Path) -> None:
    snapshot, files = _saved(auth_repo)
    shutil.rmtree(auth_repo / ".git")

    assert snapshot.facts is not None
    assert gitfacts.drift(str(auth_repo), snapshot.facts, files) is None


def test_when_the_file_list_was_cut_unrecorded_files_are_counted_not_flagged(auth_repo: Path) -> None:
    snapshot, files = _saved(auth_repo)
    assert snapshot.facts is not None
    kept = files[:1]
    write(auth_repo, str(Path(files[0].path)), "edited after the save\n")

    cut = gitfacts.drift(str(auth_repo), snapshot.facts, kept, complete=False)
    whole = gitfacts.drift(str(auth_repo), snapshot.facts, kept, complete=True)

    assert cut is not None
    assert whole is not None
    assert (cut.changed_since, cut.unknown) == ((files[0].path,), 2)
    assert whole.unknown == 0
    assert set(whole.changed_since) == {f.path for f in files}


def test_drift_handles_file_names_with_spaces_and_shell_characters(repo: Path, git: Git) -> None:
    name = "docs/a b; $(echo x).md"
    write(repo, name, "one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "odd name")
    saved = _saved(repo)
    write(repo, name, "two\n")
    write(repo, "clean copy.md", "new\n")

    drift = _drift(repo, *saved)

    assert drift.changed_since == ("clean copy.md", name)
