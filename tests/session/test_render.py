"""The brief's shape and wording in every case the spec names, its 10,000-character bound, and the hook output."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from checkpoint_mcp.session import model, render
from checkpoint_mcp.session.git import Drift
from checkpoint_mcp.session.model import Checkpoint, Command, FileEntry, GitFacts

SAVED = datetime(2026, 10, 8, 2, 23, 55, 477000, tzinfo=UTC)
NOW = SAVED + timedelta(minutes=2)


@pytest.fixture
def example(spec_checkpoint: bytes) -> Checkpoint:
    return model.parse(spec_checkpoint)


def _drift(example: Checkpoint, **changes: object) -> Drift:
    assert example.git is not None
    drift = Drift(
        saved_head=example.git.head,
        saved_branch=example.git.branch,
        current_branch=example.git.branch,
        current_head="c" * 40,
        commits_since=1,
        changed_since=("src/auth/session.ts",),
    )
    return dataclasses.replace(drift, **changes)  # type: ignore[arg-type]


def test_the_spec_example_checkpoint_renders_exactly_the_spec_example_brief(
    example: Checkpoint, spec_brief: str
) -> None:
    brief = render.brief(example, _drift(example), now=NOW)

    assert brief == spec_brief.rstrip("\n")


def test_without_git_facts_there_is_no_branch_line_and_no_drift_section(example: Checkpoint) -> None:
    brief = render.brief(dataclasses.replace(example, git=None), None, now=NOW)

    assert "Branch" not in brief
    assert "## Since this checkpoint" not in brief
    assert brief.splitlines()[1:3] == ["", "## Goal"]


def test_an_unreachable_saved_commit_is_named_in_the_drift_section(example: Checkpoint) -> None:
    brief = render.brief(example, _drift(example, commits_since=None), now=NOW)

    assert "- ⚠ Saved commit b2ef1b591 is no longer reachable from HEAD" in brief
    assert "new commit(s)" not in brief


def test_a_branch_change_and_a_quiet_work_tree_are_reported(example: Checkpoint) -> None:
    moved = render.brief(example, _drift(example, current_branch="main", commits_since=0, changed_since=()), now=NOW)
    quiet = render.brief(example, _drift(example, commits_since=0, changed_since=()), now=NOW)

    assert "- Branch changed: `feat/github-oauth` → `main`" in moved
    assert quiet.endswith("## Since this checkpoint\n- No changes since the checkpoint")


def test_uncommitted_files_missing_from_a_cut_file_list_are_called_unknown(example: Checkpoint) -> None:
    brief = render.brief(example, _drift(example, commits_since=0, changed_since=(), unknown=7), now=NOW)

    assert brief.endswith(
        "## Since this checkpoint\n- 7 other uncommitted file(s) are not listed in the checkpoint "
        "(its file list was cut), so whether they changed since is unknown"
    )


def test_unknown_drift_says_why(example: Checkpoint) -> None:
    brief = render.brief(example, None, now=NOW, drift_problem="`git status` did not finish within 3 seconds")

    assert brief.endswith("## Since this checkpoint\n- Drift unknown: `git status` did not finish within 3 seconds.")


def test_a_clean_detached_checkout_gets_its_own_branch_line(example: Checkpoint) -> None:
    git = GitFacts(branch=None, head="d" * 40, dirty=False)

    assert render.brief(dataclasses.replace(example, git=git), None, now=NOW).splitlines()[1] == (
        "Detached HEAD @ ddddddddd (clean)"
    )


def test_commands_show_exit_status_and_only_the_last_ten(example: Checkpoint) -> None:
    commands = tuple(Command(f"step {i}", at=example.updated_at, exit_code=i % 3 or None) for i in range(12))

    brief = render.brief(dataclasses.replace(example, recent_commands=commands), None, now=NOW)

    section = brief.split("## Recent commands (last 10, oldest first)\n")[1].split("\n\n")[0].splitlines()
    assert section[0] == "- ✗ exit 2 `step 2`"
    assert section[1] == "- `step 3`"
    assert len(section) == 10


def test_warnings_are_shown_under_the_heading(example: Checkpoint) -> None:
    brief = render.brief(example, None, now=NOW, warnings=["Loaded the backup x: y."])

    assert brief.splitlines()[2] == "> ⚠ Loaded the backup x: y."


def _enormous(example: Checkpoint) -> Checkpoint:
    note = "n" * model.ITEM_TEXT_MAX
    return dataclasses.replace(
        example,
        tasks=tuple(model.Task(f"task {i} " + "t" * 480, "pending") for i in range(30)),
        summary="s" * model.SUMMARY_MAX,
        next_steps=tuple(f"step {i} " + "x" * 480 for i in range(20)),
        decisions=tuple(f"decision {i} " + "d" * 480 for i in range(20)),
        modified_files=tuple(FileEntry(f"src/{i:03}/" + "p" * 900, "M", "git", note=note) for i in range(100)),
        recent_commands=tuple(Command("c" * 2000, at=example.updated_at, exit_code=0) for _ in range(50)),
    )


def test_the_brief_stays_under_ten_thousand_characters_cutting_the_longest_sections_first(
    example: Checkpoint,
) -> None:
    drift = _drift(example, changed_since=tuple(f"generated/{i:05}.js" for i in range(5000)))

    brief = render.brief(_enormous(example), drift, now=NOW)

    assert len(brief) < render.BRIEF_MAX_CHARS
    assert brief.startswith("# Resuming: my-app")
    for heading in ("## Goal", "## Tasks", "## Where things stand", "## Next steps", "## Decisions & gotchas"):
        assert heading in brief
    assert "## Files touched (100)" in brief
    assert "- 1 new commit(s) on HEAD" in brief
    assert "- ⚠ Changed after the checkpoint, re-read before editing: `generated/00000.js`" in brief
    last = brief.splitlines()[-1]
    assert last.startswith("_Brief cut to stay under 10,000 characters: ")
    assert re.search(r"Files touched \(\d of 100 shown, long entries shortened\)", last)
    assert re.search(r"Since this checkpoint \(\d+ of 5000 shown\)", last)
    assert "Recent commands" in last
    assert "Goal" not in last
    assert 'format "full"' in last
    assert "Add GitHub OAuth login with persistent sessions" in brief


def test_a_brief_that_fits_is_not_cut(example: Checkpoint) -> None:
    assert "_Brief cut" not in render.brief(example, _drift(example), now=NOW)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "just now"), (59, "just now"), (120, "2m ago"), (3599, "59m ago"), (7200, "2h ago"), (3 * 86400, "3d ago")],
)
def test_the_age_is_short_and_human(seconds: int, text: str) -> None:
    assert render.age(seconds) == text


@pytest.mark.parametrize(
    ("text", "markdown"),
    [("npm test", "`npm test`"), ("echo `id`", "`` echo `id` ``"), ("a\nb", "`a ↵ b`")],
)
def test_inline_code_survives_backticks_and_newlines(text: str, markdown: str) -> None:
    assert render.code(text) == markdown


def test_the_save_confirmation_reads_like_the_spec(example: Checkpoint) -> None:
    text = render.save_confirmation(
        "/home/me/code/my-app/.claude-checkpoint", 2202, "replace", example, ["Redacted 1 secret-looking value(s)."]
    )

    assert text == (
        "Checkpoint saved to /home/me/code/my-app/.claude-checkpoint (2202 bytes, replace).\n"
        "3 task(s), 3 file(s), 2 command(s) on feat/github-oauth@b2ef1b591.\n"
        "⚠ Redacted 1 secret-looking value(s)."
    )


def test_the_hook_output_is_claude_code_session_start_json() -> None:
    assert json.loads(render.session_start_hook("# Resuming: app")) == {
        "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "# Resuming: app"}
    }


def test_the_full_format_is_the_checkpoint_document_plus_drift(example: Checkpoint, spec_checkpoint: bytes) -> None:
    document = json.loads(render.full(example, _drift(example)))

    assert document["checkpoint"] == json.loads(spec_checkpoint) | {"version": 2, "journals": []}
    assert "journals" not in document  # no journal configured: the document is as it always was
    assert document["drift"] == {
        "branchChanged": False,
        "currentBranch": "feat/github-oauth",
        "commitsSince": 1,
        "changedSince": ["src/auth/session.ts"],
    }
    assert document["warnings"] == []
