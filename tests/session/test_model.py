"""The `.claude-checkpoint` file: the spec's example loads, versions migrate or are refused, bad files are named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checkpoint_mcp.errors import CheckpointFileError, CheckpointVersionError
from checkpoint_mcp.session import model
from checkpoint_mcp.session.model import Checkpoint, Command, FileEntry, GitFacts, Meta, Task


def test_the_spec_example_file_loads_field_for_field(spec_checkpoint: bytes) -> None:
    checkpoint = model.parse(spec_checkpoint)

    assert checkpoint.id == "ee5507c0-855e-44a5-85c1-d97b767537c9"
    assert checkpoint.created_at == checkpoint.updated_at == "2026-10-08T02:23:55.477Z"
    assert (checkpoint.generator_name, checkpoint.generator_version) == ("claude-checkpoint-mcp", "0.1.0")
    assert checkpoint.project_name == "my-app"
    assert checkpoint.git == GitFacts("feat/github-oauth", "b2ef1b5919ee5d456ea146c9362a7abc92b1e556", dirty=True)
    assert checkpoint.goal == "Add GitHub OAuth login with persistent sessions"
    assert [t.status for t in checkpoint.tasks] == ["done", "in_progress", "pending"]
    assert checkpoint.summary.startswith("Callback exchanges the code")
    assert len(checkpoint.next_steps) == 3
    assert len(checkpoint.decisions) == 2
    assert checkpoint.modified_files[0] == FileEntry(
        path="src/auth/session.ts",
        status="M",
        source="git",
        note="cookie options",
        hash="9ec893ef673dac860e7e2b6fcaad602983eeb0b1",
    )
    assert checkpoint.modified_files[2].status == "??"
    assert checkpoint.recent_commands[0] == Command(
        command="GITHUB_CLIENT_SECRET=«redacted» npm run dev", at="2026-10-08T02:23:55.477Z", exit_code=0
    )
    assert checkpoint.recent_commands[1].note == "2 failing in session.spec.ts: cookie missing after reload"
    assert checkpoint.meta == Meta(redactions=1, truncated=False)


def test_serializing_the_spec_example_gives_back_the_same_document_as_version_2(spec_checkpoint: bytes) -> None:
    original = json.loads(spec_checkpoint)
    assert original["version"] == 1  # the real file of the original tool: a version-1 file

    document = json.loads(model.serialize(model.parse(spec_checkpoint)))

    assert document == original | {"version": 2, "journals": []}
    assert list(document) == [*original, "journals"]


def test_the_file_keeps_the_spec_key_order_and_leaves_out_empty_optional_members() -> None:
    checkpoint = Checkpoint(
        id="x",
        created_at="2026-01-01T00:00:00.000Z",
        updated_at="2026-01-01T00:00:00.000Z",
        project_name="p",
        goal="g",
        modified_files=(FileEntry("a.txt", "D", "git"),),
        recent_commands=(Command("ls", at="2026-01-01T00:00:00.000Z"),),
    )

    document = json.loads(model.serialize(checkpoint))

    assert list(document) == [
        "version",
        "id",
        "createdAt",
        "updatedAt",
        "generator",
        "project",
        "git",
        "goal",
        "summary",
        "nextSteps",
        "decisions",
        "modifiedFiles",
        "recentCommands",
        "meta",
        "journals",
    ]
    assert document["git"] is None
    assert document["modifiedFiles"] == [{"path": "a.txt", "status": "D", "source": "git"}]
    assert document["recentCommands"] == [{"command": "ls", "at": "2026-01-01T00:00:00.000Z"}]
    assert document["generator"] == {"name": "checkpoint-mcp", "version": model.__version__}


def test_a_version_0_draft_file_is_migrated_to_version_1() -> None:
    draft = {
        "id": "d",
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-02T00:00:00Z",
        "project": {"name": "old"},
        "goal": "Ship the draft",
        "tasks": [{"description": "write it", "status": "done"}],
        "modifiedFiles": ["src/a.py", {"path": "src/b.py", "status": "??", "source": "git"}],
        "lastCommit": {"branch": "main", "sha": "a" * 40, "dirty": True},
    }

    checkpoint = model.parse(json.dumps(draft).encode())

    assert checkpoint.goal == "Ship the draft"
    assert checkpoint.tasks == (Task("write it", "done"),)
    assert checkpoint.modified_files == (
        FileEntry("src/a.py", "M", "agent"),
        FileEntry("src/b.py", "??", "git"),
    )
    assert checkpoint.git == GitFacts("main", "a" * 40, dirty=True)
    assert json.loads(model.serialize(checkpoint))["version"] == model.CURRENT_VERSION


def test_a_file_from_a_newer_version_is_refused_with_both_versions_named(spec_checkpoint: bytes) -> None:
    document = json.loads(spec_checkpoint) | {"version": 3}

    with pytest.raises(CheckpointVersionError) as caught:
        model.parse(json.dumps(document).encode())

    assert (caught.value.found, caught.value.supported) == (3, 2)
    assert "newer than this Checkpoint supports (2)" in str(caught.value)


def _spec(spec_checkpoint: bytes) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(spec_checkpoint)
    return document


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version="1"), "version: expected a non-negative integer"),
        (lambda d: d.update(goal="no object"), "goal: expected an object"),
        (lambda d: d["goal"].update(primary=""), "goal.primary: expected a non-empty string"),
        (lambda d: d["goal"].update(primary="x" * 501), "goal.primary: longer than 500 characters"),
        (lambda d: d["goal"]["tasks"][0].update(status="later"), "goal.tasks[0].status: expected one of"),
        (lambda d: d.update(createdAt="yesterday"), "createdAt: not an ISO 8601 timestamp"),
        (lambda d: d["git"].update(head="main"), "git.head: expected a full commit hash"),
        (lambda d: d["modifiedFiles"][0].update(path="/etc/passwd"), "modifiedFiles[0].path: expected a relative"),
        (lambda d: d["modifiedFiles"][1].update(path="../outside.ts"), "modifiedFiles[1].path: expected a relative"),
        (lambda d: d["modifiedFiles"][2].update(hash="not-a-hash"), "modifiedFiles[2].hash: expected a git blob"),
        (lambda d: d["modifiedFiles"][0].update(source="human"), "modifiedFiles[0].source: expected git or agent"),
        (lambda d: d["recentCommands"][1].update(exitCode="1"), "recentCommands[1].exitCode: expected an integer"),
        (lambda d: d["recentCommands"][0].update(at=None), "recentCommands[0].at: expected a non-empty string"),
        (lambda d: d.update(nextSteps=["ok"] * 21), "nextSteps: more than 20 items"),
        (lambda d: d.update(decisions=[7]), "decisions[0]: expected a string"),
    ],
)
def test_an_invalid_field_is_refused_with_its_location(spec_checkpoint: bytes, change: Any, message: str) -> None:
    document = _spec(spec_checkpoint)
    change(document)

    with pytest.raises(CheckpointFileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        model.parse(json.dumps(document).encode())


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", b"[]", b"null"])
def test_bytes_that_are_not_a_json_object_are_refused(data: bytes) -> None:
    with pytest.raises(CheckpointFileError):
        model.parse(data)


def test_a_hand_written_minimal_file_loads_with_defaults() -> None:
    minimal = {
        "version": 1,
        "id": "m",
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
        "goal": {"primary": "Keep going"},
    }

    checkpoint = model.parse(json.dumps(minimal).encode())

    assert checkpoint.tasks == ()
    assert checkpoint.summary == ""
    assert checkpoint.git is None
    assert checkpoint.meta == Meta()


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("src/a.ts", True),
        ("a", True),
        (".env", True),
        ("", False),
        (".", False),
        ("/abs", False),
        ("../up", False),
        ("a/../b", False),
        ("a//b", False),
        ("a\\b", False),
    ],
)
def test_only_normalized_paths_inside_the_root_count_as_relative(path: str, relative: bool) -> None:
    assert model.is_relative_path(path) is relative
