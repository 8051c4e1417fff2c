"""Save and load in-process: limits surfaced as warnings, cut file lists, and git failing underneath."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from checkpoint_mcp.errors import PathOutsideProject
from checkpoint_mcp.session import git as gitfacts
from checkpoint_mcp.session import service
from checkpoint_mcp.session.merge import CommandInput, FileNote, SaveRequest
from checkpoint_mcp.session.model import Task
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .conftest import Git
from .helpers import write


def _root(path: Path) -> ProjectRoot:
    return ProjectRoot(str(path), RootSource.ARGUMENT)


def test_a_save_then_a_load_round_trips_in_process(repo: Path) -> None:
    request = SaveRequest(
        goal="Round trip",
        tasks=(Task("Write it", "done"),),
        modified_files=(FileNote("notes.md", "scratch"),),
        recent_commands=(CommandInput("make", 2, "linker error"),),
    )

    saved = service.save(request, _root(repo))
    loaded = service.load(_root(repo))

    assert saved.warnings == ()
    assert loaded.found
    assert loaded.checkpoint == saved.checkpoint
    assert "- notes.md (M) — scratch" in loaded.text
    assert "- ✗ exit 2 `make` — linker error" in loaded.text


def test_more_dirty_files_than_the_list_holds_are_trimmed_and_later_reported_as_unknown(repo: Path) -> None:
    for i in range(130):
        write(repo, f"gen/{i:03}.txt", f"{i}\n")

    saved = service.save(SaveRequest(goal="Generated"), _root(repo))
    loaded = service.load(_root(repo))

    assert len(saved.checkpoint.modified_files) == 100
    assert "Trimmed to fit the limits: dropped 30 file(s) beyond the limit of 100." in saved.warnings
    assert loaded.drift is not None
    assert (loaded.drift.changed_since, loaded.drift.unknown) == ((), 30)
    assert "- 30 other uncommitted file(s) are not listed in the checkpoint" in loaded.text


def test_an_absolute_path_outside_the_project_fails_before_anything_is_written(repo: Path, tmp_path: Path) -> None:
    request = SaveRequest(goal="g", modified_files=(FileNote(str(tmp_path / "elsewhere.txt")),))

    with pytest.raises(PathOutsideProject):
        service.save(request, _root(repo))

    assert not (repo / ".claude-checkpoint").exists()


def test_when_git_times_out_the_save_goes_on_without_git_facts_and_says_so(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service.save(SaveRequest(goal="With git"), _root(repo))
    slow = tmp_path / "slow-bin" / "git"
    slow.parent.mkdir()
    slow.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(slow.parent))
    monkeypatch.setattr(gitfacts, "GIT_TIMEOUT_SECONDS", 0.2)

    loaded = service.load(_root(repo))
    saved = service.save(SaveRequest(goal="Without git"), _root(repo))

    assert "- Drift unknown: `git rev-parse` did not finish within 0.2 seconds." in loaded.text
    assert saved.checkpoint.git is None
    assert any(w.startswith("Saved without git facts, so drift cannot be detected") for w in saved.warnings)


def test_merging_onto_a_corrupt_checkpoint_uses_the_backup_and_says_so(repo: Path) -> None:
    service.save(SaveRequest(goal="g", decisions=("Keep me",)), _root(repo))
    service.save(SaveRequest(goal="g", decisions=("Keep me",)), _root(repo))
    (repo / ".claude-checkpoint").write_text("{")

    merged = service.save(SaveRequest(goal="g", mode="merge", decisions=("Add me",)), _root(repo))

    assert merged.checkpoint.decisions == ("Keep me", "Add me")
    assert any(w.startswith("Merged onto the backup") for w in merged.warnings)


def test_merging_when_both_files_are_unreadable_starts_fresh_and_says_so(repo: Path) -> None:
    (repo / ".claude-checkpoint").write_text("{")
    (repo / ".claude-checkpoint.prev").write_text("[")

    merged = service.save(SaveRequest(goal="Fresh", mode="merge"), _root(repo))

    assert merged.checkpoint.goal == "Fresh"
    assert any(w.startswith("The previous checkpoint could not be read") for w in merged.warnings)


def test_a_redacted_value_never_pushes_a_field_past_its_limit(repo: Path) -> None:
    goal = "x" * 483 + " password=abc"

    saved = service.save(SaveRequest(goal=goal, summary="TOKEN=a"), _root(repo))

    assert len(saved.checkpoint.goal) <= 500
    assert saved.checkpoint.goal.endswith("…")
    assert "abc" not in saved.checkpoint.goal
    assert saved.checkpoint.summary == "TOKEN=«redacted»"
    assert service.load(_root(repo)).found


def test_a_file_committed_after_the_save_without_changes_stays_quiet(repo: Path, git: Git) -> None:
    write(repo, "a.txt", "a\n")
    service.save(SaveRequest(goal="g"), _root(repo))
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "a")

    loaded = service.load(_root(repo))

    assert loaded.drift is not None
    assert (loaded.drift.commits_since, loaded.drift.changed_since) == (1, ())
