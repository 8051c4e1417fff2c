"""replace and merge exactly as the spec's table, the list limits, and the 64 KB file limit."""

from __future__ import annotations

import dataclasses

from checkpoint_mcp.session import model
from checkpoint_mcp.session.merge import CommandInput, FileNote, SaveRequest, Scanned, Stamp, build, fit
from checkpoint_mcp.session.model import Checkpoint, Command, FileEntry, GitFacts, Meta, Task

EARLIER = "2026-01-01T00:00:00.000Z"
NOW = "2026-01-02T00:00:00.000Z"
GIT = GitFacts("main", "a" * 40, dirty=True)


def _stamp(redactions: int = 0) -> Stamp:
    return Stamp(new_id="new-id", now=NOW, project_name="app", git=GIT, redactions=redactions)


PREVIOUS = Checkpoint(
    id="old-id",
    created_at=EARLIER,
    updated_at=EARLIER,
    project_name="app",
    goal="Old goal",
    tasks=(Task("Write the parser", "in_progress"), Task("Ship it", "pending")),
    summary="Parser half done",
    next_steps=("Finish the parser",),
    decisions=("Use a hand-written lexer",),
    modified_files=(FileEntry("src/lexer.py", "M", "git", note="the lexer", hash="b" * 40),),
    recent_commands=(Command("pytest", at=EARLIER, exit_code=1),),
    meta=Meta(redactions=2),
)


def test_replace_sets_every_field_and_starts_a_new_identity() -> None:
    request = SaveRequest(goal="New goal", tasks=(Task("Only task", "done"),), summary="Fresh")

    checkpoint = build(PREVIOUS, request, [], _stamp()).checkpoint

    assert (checkpoint.id, checkpoint.created_at, checkpoint.updated_at) == ("new-id", NOW, NOW)
    assert checkpoint.goal == "New goal"
    assert checkpoint.tasks == (Task("Only task", "done"),)
    assert checkpoint.summary == "Fresh"
    assert (checkpoint.next_steps, checkpoint.decisions, checkpoint.recent_commands) == ((), (), ())
    assert checkpoint.modified_files == ()
    assert checkpoint.meta == Meta(redactions=0, truncated=False)
    assert checkpoint.git == GIT


def test_merge_updates_tasks_by_description_and_appends_new_ones() -> None:
    request = SaveRequest(
        goal="Old goal",
        mode="merge",
        tasks=(Task("write the  PARSER", "done"), Task("Document it", "pending")),
    )

    checkpoint = build(PREVIOUS, request, [], _stamp()).checkpoint

    assert checkpoint.tasks == (
        Task("write the  PARSER", "done"),
        Task("Ship it", "pending"),
        Task("Document it", "pending"),
    )


def test_merge_keeps_summary_and_next_steps_unless_provided() -> None:
    kept = build(PREVIOUS, SaveRequest(goal="g", mode="merge"), [], _stamp()).checkpoint
    replaced = build(
        PREVIOUS, SaveRequest(goal="g", mode="merge", summary="", next_steps=("Ship",)), [], _stamp()
    ).checkpoint

    assert (kept.summary, kept.next_steps) == ("Parser half done", ("Finish the parser",))
    assert (replaced.summary, replaced.next_steps) == ("", ("Ship",))


def test_merge_appends_decisions_without_duplicates() -> None:
    request = SaveRequest(goal="g", mode="merge", decisions=("use a hand-written lexer", "No regex engine"))

    checkpoint = build(PREVIOUS, request, [], _stamp()).checkpoint

    assert checkpoint.decisions == ("Use a hand-written lexer", "No regex engine")


def test_merge_appends_commands_stamped_with_the_save_time() -> None:
    request = SaveRequest(goal="g", mode="merge", recent_commands=(CommandInput("pytest", 0, "green"),))

    checkpoint = build(PREVIOUS, request, [], _stamp()).checkpoint

    assert checkpoint.recent_commands == (
        Command("pytest", at=EARLIER, exit_code=1),
        Command("pytest", at=NOW, exit_code=0, note="green"),
    )


def test_merge_drops_the_oldest_commands_beyond_fifty() -> None:
    previous = dataclasses.replace(PREVIOUS, recent_commands=tuple(Command(f"old {i}", at=EARLIER) for i in range(45)))
    request = SaveRequest(goal="g", mode="merge", recent_commands=tuple(CommandInput(f"new {i}") for i in range(10)))

    built = build(previous, request, [], _stamp())

    commands = [c.command for c in built.checkpoint.recent_commands]
    assert commands == [f"old {i}" for i in range(5, 45)] + [f"new {i}" for i in range(10)]
    assert built.checkpoint.meta.truncated
    assert built.dropped == ("dropped 5 oldest command(s) beyond the limit of 50",)


def test_merge_preserves_id_and_created_at_and_accumulates_redactions() -> None:
    checkpoint = build(PREVIOUS, SaveRequest(goal="g", mode="merge"), [], _stamp(redactions=1)).checkpoint

    assert (checkpoint.id, checkpoint.created_at, checkpoint.updated_at) == ("old-id", EARLIER, NOW)
    assert checkpoint.meta.redactions == 3


def test_merge_without_a_previous_checkpoint_starts_fresh() -> None:
    checkpoint = build(None, SaveRequest(goal="g", mode="merge"), [], _stamp()).checkpoint

    assert (checkpoint.id, checkpoint.created_at) == ("new-id", NOW)


def test_replace_files_are_the_git_scan_plus_provided_with_provided_first() -> None:
    request = SaveRequest(
        goal="g",
        modified_files=(FileNote("src/session.ts", "cookie options"), FileNote("docs/committed.md", "read me")),
    )
    scanned = [Scanned("src/callback.ts", "M"), Scanned("src/session.spec.ts", "??"), Scanned("src/session.ts", "M")]

    files = build(PREVIOUS, request, scanned, _stamp()).checkpoint.modified_files

    assert files == (
        FileEntry("src/session.ts", "M", "git", note="cookie options"),
        FileEntry("docs/committed.md", "M", "agent", note="read me"),
        FileEntry("src/callback.ts", "M", "git"),
        FileEntry("src/session.spec.ts", "??", "git"),
    )


def test_merge_files_add_previously_recorded_ones_as_agent_files_keeping_their_notes() -> None:
    request = SaveRequest(goal="g", mode="merge", modified_files=(FileNote("src/parser.py"),))
    scanned = [Scanned("src/parser.py", "??")]

    files = build(PREVIOUS, request, scanned, _stamp()).checkpoint.modified_files

    assert files == (
        FileEntry("src/parser.py", "??", "git"),
        FileEntry("src/lexer.py", "M", "agent", note="the lexer"),
    )


def test_a_file_still_dirty_keeps_its_earlier_note_when_none_is_given() -> None:
    scanned = [Scanned("src/lexer.py", "M")]

    files = build(PREVIOUS, SaveRequest(goal="g", mode="merge"), scanned, _stamp()).checkpoint.modified_files

    assert files == (FileEntry("src/lexer.py", "M", "git", note="the lexer"),)


def test_list_limits_are_enforced_and_reported() -> None:
    previous = dataclasses.replace(
        PREVIOUS,
        tasks=tuple(Task(f"done {i}", "done") for i in range(5))
        + tuple(Task(f"open {i}", "pending") for i in range(25)),
        decisions=tuple(f"decision {i}" for i in range(20)),
    )
    request = SaveRequest(
        goal="g",
        mode="merge",
        tasks=(Task("another", "pending"), Task("and another", "pending")),
        decisions=("one more",),
    )
    scanned = [Scanned(f"gen/{i:03}.py", "??") for i in range(120)]

    built = build(previous, request, scanned, _stamp())

    checkpoint = built.checkpoint
    assert len(checkpoint.tasks) == 30
    assert [t.description for t in checkpoint.tasks[:3]] == ["done 2", "done 3", "done 4"]
    assert checkpoint.decisions[0] == "decision 1"
    assert checkpoint.decisions[-1] == "one more"
    assert len(checkpoint.modified_files) == 100
    assert checkpoint.modified_files[-1].path == "gen/099.py"
    assert checkpoint.meta.truncated
    assert built.dropped == (
        "dropped 2 task(s) beyond the limit of 30",
        "dropped 1 oldest decision(s) beyond the limit of 20",
        "dropped 21 file(s) beyond the limit of 100",
    )


def _huge() -> Checkpoint:
    text = "x" * model.ITEM_TEXT_MAX
    return dataclasses.replace(
        PREVIOUS,
        tasks=tuple(Task(f"{i} {text}"[:500], "pending") for i in range(30)),
        summary="s" * model.SUMMARY_MAX,
        next_steps=tuple(f"{i} {text}"[:500] for i in range(20)),
        decisions=tuple(f"{i} {text}"[:500] for i in range(20)),
        modified_files=tuple(FileEntry(f"f{i:03}/" + "p" * 900, "M", "git", note=text) for i in range(100)),
        recent_commands=tuple(Command(f"{i} " + "c" * 1990, at=NOW, note=text) for i in range(50)),
    )


def test_an_oversized_checkpoint_drops_the_oldest_commands_first_then_other_lists() -> None:
    huge = _huge()

    built = fit(huge)

    data = model.serialize(built.checkpoint)
    assert len(data) <= model.FILE_BYTES_MAX
    assert built.checkpoint.recent_commands == ()
    assert built.checkpoint.modified_files == huge.modified_files[: len(built.checkpoint.modified_files)]
    assert 0 < len(built.checkpoint.modified_files) < 100
    assert built.checkpoint.tasks == huge.tasks
    assert built.checkpoint.meta.truncated
    assert built.dropped == (
        "dropped 50 oldest command(s) to keep the file under 64 KB",
        f"dropped {100 - len(built.checkpoint.modified_files)} file(s) to keep the file under 64 KB",
    )


def test_a_slightly_oversized_checkpoint_loses_only_the_oldest_commands_it_must() -> None:
    huge = _huge()
    small = dataclasses.replace(huge, modified_files=(), tasks=(), next_steps=(), decisions=())
    size = len(model.serialize(small))

    built = fit(small, limit=size - 100)

    assert [c.command for c in built.checkpoint.recent_commands] == [c.command for c in small.recent_commands[1:]]


def test_a_checkpoint_within_the_limit_is_untouched() -> None:
    built = fit(PREVIOUS)

    assert built == type(built)(PREVIOUS, ())
