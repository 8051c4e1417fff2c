"""`checkpoint session` end to end: the SDK client over real stdio pipes, against real git repositories."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from checkpoint_mcp.session import model

from .conftest import Git, SessionFactory
from .helpers import text_of, write

ERAS = pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
pytestmark = pytest.mark.anyio


def _normalized(brief: str) -> list[str]:
    """The brief's lines with the save time and the commit hash masked: they differ on every run."""
    brief = re.sub(r"\(checkpoint saved [^,]+, [\d-]+ [\d:]+ UTC\)", "(checkpoint saved AGE, TIME UTC)", brief)
    return re.sub(r" @ [0-9a-f]{9} ", " @ SHA ", brief).splitlines()


@ERAS
async def test_both_protocol_eras_serve_the_two_tools_with_readable_schemas(
    repo: Path, session: SessionFactory, mode: str, version: str
) -> None:
    with anyio.fail_after(30):
        async with session(repo, mode=mode) as client:
            assert client.protocol_version == version
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            instructions = client.instructions

    assert set(tools) == {"save_session_checkpoint", "load_session_checkpoint"}
    assert instructions is not None
    for phrase in ("load_session_checkpoint", "start of a session", "before a risky operation", "milestone"):
        assert phrase in instructions
    save, load = tools["save_session_checkpoint"], tools["load_session_checkpoint"]
    properties = save.input_schema["properties"]
    assert save.input_schema["required"] == ["goal"]
    assert properties["goal"]["maxLength"] == 500
    assert properties["summary"]["maxLength"] == 4000
    limits = {name: properties[name]["maxItems"] for name in properties if "maxItems" in properties[name]}
    assert limits == {
        "tasks": 30,
        "nextSteps": 20,
        "decisions": 20,
        "modifiedFiles": 100,
        "recentCommands": 50,
    }
    assert properties["tasks"]["items"]["properties"]["status"]["enum"] == ["pending", "in_progress", "done", "blocked"]
    assert properties["mode"]["enum"] == ["replace", "merge"]
    assert properties["mode"]["default"] == "replace"
    assert set(properties["recentCommands"]["items"]["properties"]) == {"command", "exitCode", "note"}
    assert set(properties["modifiedFiles"]["items"]["properties"]) == {"path", "note"}
    assert properties["projectRoot"]["type"] == "string"
    assert "$ref" not in json.dumps(save.input_schema)
    assert load.input_schema["properties"]["format"]["enum"] == ["brief", "full"]
    assert set(load.input_schema["properties"]) == {"format", "projectRoot"}
    assert load.annotations is not None
    assert load.annotations.read_only_hint is True
    assert save.annotations is not None
    assert save.annotations.read_only_hint is False
    assert save.output_schema is not None
    assert load.output_schema is not None


@ERAS
async def test_the_spec_example_scenario_gives_the_spec_brief_line_for_line(
    repo: Path,
    *,
    git: Git,
    session: SessionFactory,
    spec_save_arguments: dict[str, Any],
    spec_brief: str,
    mode: str,
    version: str,
) -> None:
    git(repo, "checkout", "-q", "-b", "feat/github-oauth")
    write(repo, "src/auth/session.ts", "export const cookie = {}\n")
    write(repo, "src/auth/callback.ts", "export async function callback() {}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "auth scaffolding")
    write(repo, "src/auth/session.ts", "export const cookie = { sameSite: 'none' }\n")
    write(repo, "src/auth/callback.ts", "export async function callback(code: string) {}\n")
    write(repo, "src/auth/session.spec.ts", "test('cookie survives reload')\n")

    with anyio.fail_after(30):
        async with session(repo, mode=mode) as client:
            saved = await client.call_tool("save_session_checkpoint", spec_save_arguments)
            git(repo, "commit", "-qm", "callback", "src/auth/callback.ts")
            write(repo, "src/auth/session.ts", "export const cookie = { sameSite: 'lax' }\n")
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert not saved.is_error, text_of(saved)
    assert _normalized(text_of(loaded)) == _normalized(spec_brief.rstrip("\n"))
    assert loaded.structured_content is not None
    assert loaded.structured_content["drift"] == {
        "branchChanged": False,
        "currentBranch": "feat/github-oauth",
        "commitsSince": 1,
        "changedSince": ["src/auth/session.ts"],
    }


async def test_a_save_answers_with_the_spec_text_and_structured_content(
    repo: Path,
    session: SessionFactory,
    spec_save_arguments: dict[str, Any],
    checkpoint_file: Callable[[Path], dict[str, Any]],
) -> None:
    write(repo, "src/auth/session.ts", "x\n")

    with anyio.fail_after(30):
        async with session(repo) as client:
            result = await client.call_tool("save_session_checkpoint", spec_save_arguments)

    path = repo / ".claude-checkpoint"
    size = path.stat().st_size
    head = checkpoint_file(repo)["git"]["head"][:9]
    assert text_of(result) == (
        f"Checkpoint saved to {path} ({size} bytes, replace).\n"
        f"3 task(s), 1 file(s), 2 command(s) on main@{head}.\n"
        "⚠ Redacted 1 secret-looking value(s)."
    )
    assert result.structured_content == {
        "path": str(path),
        "bytes": size,
        "mode": "replace",
        "counts": {"tasks": 3, "modifiedFiles": 1, "recentCommands": 2, "redactions": 1},
        "warnings": ["Redacted 1 secret-looking value(s)."],
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_the_saved_file_holds_the_git_facts_and_blob_hashes(
    repo: Path,
    git: Git,
    session: SessionFactory,
    checkpoint_file: Callable[[Path], dict[str, Any]],
) -> None:
    write(repo, "tracked.txt", "one\n")
    git(repo, "add", "tracked.txt")
    git(repo, "commit", "-qm", "tracked")
    write(repo, "tracked.txt", "two\n")
    write(repo, "docs/new.md", "draft\n")

    with anyio.fail_after(30):
        async with session(repo) as client:
            await client.call_tool(
                "save_session_checkpoint",
                {"goal": "Document", "modifiedFiles": [{"path": str(repo / "docs" / "new.md"), "note": "the draft"}]},
            )

    document = checkpoint_file(repo)
    assert document["git"] == {"branch": "main", "head": git(repo, "rev-parse", "HEAD").strip(), "dirty": True}
    assert document["project"] == {"name": "my-app"}
    assert document["modifiedFiles"] == [
        {
            "path": "docs/new.md",
            "status": "??",
            "source": "git",
            "note": "the draft",
            "hash": git(repo, "hash-object", "docs/new.md").strip(),
        },
        {
            "path": "tracked.txt",
            "status": "M",
            "source": "git",
            "hash": git(repo, "hash-object", "tracked.txt").strip(),
        },
    ]
    assert model.parse((repo / ".claude-checkpoint").read_bytes()).goal == "Document"


async def test_merge_updates_tasks_appends_and_keeps_identity_as_in_the_spec(
    repo: Path,
    session: SessionFactory,
    spec_save_arguments: dict[str, Any],
    checkpoint_file: Callable[[Path], dict[str, Any]],
) -> None:
    merge = {
        "goal": "Add GitHub OAuth login with persistent sessions",
        "mode": "merge",
        "tasks": [
            {"description": "Session cookie persistence", "status": "done"},
            {"description": "Logout endpoint", "status": "in_progress"},
        ],
        "recentCommands": [{"command": "npm test -- auth", "exitCode": 0, "note": "all green"}],
    }

    with anyio.fail_after(30):
        async with session(repo) as client:
            await client.call_tool("save_session_checkpoint", spec_save_arguments)
            first = checkpoint_file(repo)
            result = await client.call_tool("save_session_checkpoint", merge)

    second = checkpoint_file(repo)
    assert result.structured_content is not None
    assert result.structured_content["mode"] == "merge"
    assert (second["id"], second["createdAt"]) == (first["id"], first["createdAt"])
    assert second["goal"]["tasks"] == [
        {"description": "OAuth callback route", "status": "done"},
        {"description": "Session cookie persistence", "status": "done"},
        {"description": "Logout endpoint", "status": "in_progress"},
    ]
    assert [c["command"] for c in second["recentCommands"]] == [
        "GITHUB_CLIENT_SECRET=«redacted» npm run dev",
        "npm test -- auth",
        "npm test -- auth",
    ]
    assert (second["summary"], second["nextSteps"], second["decisions"]) == (
        first["summary"],
        first["nextSteps"],
        first["decisions"],
    )
    assert second["meta"]["redactions"] == 1
    assert (repo / ".claude-checkpoint.prev").exists()


@ERAS
async def test_nothing_to_resume_is_found_false_and_not_an_error(
    repo: Path, session: SessionFactory, mode: str, version: str
) -> None:
    with anyio.fail_after(30):
        async with session(repo, mode=mode) as client:
            result = await client.call_tool("load_session_checkpoint", {})

    assert not result.is_error
    assert text_of(result) == f"No checkpoint at {repo / '.claude-checkpoint'}: nothing to resume."
    assert result.structured_content == {
        "found": False,
        "path": str(repo / ".claude-checkpoint"),
        "fromBackup": False,
        "updatedAt": None,
        "drift": None,
        "warnings": [],
        "journals": [],
    }


async def test_format_full_returns_the_checkpoint_json_plus_drift(repo: Path, session: SessionFactory) -> None:
    with anyio.fail_after(30):
        async with session(repo) as client:
            await client.call_tool("save_session_checkpoint", {"goal": "Full", "decisions": ["Keep it simple"]})
            result = await client.call_tool("load_session_checkpoint", {"format": "full"})

    document = json.loads(text_of(result))
    assert document["checkpoint"]["goal"] == {"primary": "Full", "tasks": []}
    assert document["checkpoint"]["decisions"] == ["Keep it simple"]
    assert document["drift"] == {"branchChanged": False, "currentBranch": "main", "commitsSince": 0, "changedSince": []}
    assert result.structured_content is not None
    assert result.structured_content["updatedAt"] == document["checkpoint"]["updatedAt"]


async def test_outside_a_repository_git_is_null_and_the_brief_has_no_drift_section(
    tmp_path: Path, session: SessionFactory, checkpoint_file: Callable[[Path], dict[str, Any]]
) -> None:
    project = tmp_path / "plain"
    project.mkdir()

    with anyio.fail_after(30):
        async with session(project, env={"CHECKPOINT_PROJECT_ROOT": str(project)}) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "No git here"})
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert checkpoint_file(project)["git"] is None
    assert "(no git facts: not a git work tree, or no commit yet)" in text_of(saved)
    assert "## Since this checkpoint" not in text_of(loaded)
    assert "Branch" not in text_of(loaded)
    assert loaded.structured_content is not None
    assert loaded.structured_content["drift"] is None


async def test_before_the_first_commit_git_is_null_but_files_are_recorded(
    tmp_path: Path, git: Git, session: SessionFactory, checkpoint_file: Callable[[Path], dict[str, Any]]
) -> None:
    project = tmp_path / "fresh"
    project.mkdir()
    git(project, "init", "-q")
    write(project, "main.py", "print('hi')\n")

    with anyio.fail_after(30):
        async with session(project) as client:
            loaded_before = await client.call_tool("save_session_checkpoint", {"goal": "First commit soon"})
            loaded = await client.call_tool("load_session_checkpoint", {})

    document = checkpoint_file(project)
    assert document["git"] is None
    assert [f["path"] for f in document["modifiedFiles"]] == ["main.py"]
    assert "## Since this checkpoint" not in text_of(loaded)
    assert not loaded_before.is_error


async def test_the_root_comes_from_the_argument_then_the_environment_variables(
    tmp_path: Path, session: SessionFactory
) -> None:
    folders = {name: tmp_path / name for name in ("argument", "checkpoint", "claude", "cwd")}
    for folder in folders.values():
        folder.mkdir()
    env = {"CHECKPOINT_PROJECT_ROOT": str(folders["checkpoint"]), "CLAUDE_PROJECT_DIR": str(folders["claude"])}

    with anyio.fail_after(30):
        async with session(folders["cwd"], env=env) as client:
            by_argument = await client.call_tool(
                "save_session_checkpoint", {"goal": "a", "projectRoot": str(folders["argument"])}
            )
            by_variable = await client.call_tool("save_session_checkpoint", {"goal": "b"})
        async with session(folders["cwd"], env={"CLAUDE_PROJECT_DIR": str(folders["claude"])}) as client:
            by_claude = await client.call_tool("save_session_checkpoint", {"goal": "c"})

    paths = [r.structured_content["path"] for r in (by_argument, by_variable, by_claude) if r.structured_content]
    assert paths == [str(folders[n] / ".claude-checkpoint") for n in ("argument", "checkpoint", "claude")]
    assert not (folders["cwd"] / ".claude-checkpoint").exists()


@ERAS
async def test_the_clients_first_file_root_is_the_project_when_nothing_else_names_one(
    repo: Path, tmp_path: Path, session: SessionFactory, mode: str, version: str
) -> None:
    elsewhere = tmp_path / "server-cwd"
    elsewhere.mkdir()
    roots = [repo.as_uri(), elsewhere.as_uri()]

    with anyio.fail_after(30):
        async with session(elsewhere, mode=mode, roots=roots) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "Rooted by the client"})
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert saved.structured_content is not None
    assert saved.structured_content["path"] == str(repo / ".claude-checkpoint")
    assert saved.structured_content["warnings"] == []
    assert "Rooted by the client" in text_of(loaded)


async def test_an_environment_root_wins_over_the_clients_roots(
    repo: Path, tmp_path: Path, session: SessionFactory
) -> None:
    client_root = tmp_path / "client-root"
    client_root.mkdir()

    with anyio.fail_after(30):
        async with session(repo, env={"CLAUDE_PROJECT_DIR": str(repo)}, roots=[client_root.as_uri()]) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "g"})

    assert saved.structured_content is not None
    assert saved.structured_content["path"] == str(repo / ".claude-checkpoint")


async def test_a_working_directory_root_that_is_not_a_git_work_tree_is_called_out(
    tmp_path: Path, session: SessionFactory
) -> None:
    cache = tmp_path / "package-cache"
    cache.mkdir()

    with anyio.fail_after(30):
        async with session(cache) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "g"})
            loaded = await client.call_tool("load_session_checkpoint", {})

    expected = f"The project root {cache} is only the working directory, and it is not a git work tree."
    assert saved.structured_content is not None
    assert loaded.structured_content is not None
    assert any(w.startswith(expected) for w in saved.structured_content["warnings"])
    assert any(w.startswith(expected) for w in loaded.structured_content["warnings"])
    assert f"⚠ {expected}" in text_of(saved)
    assert expected in text_of(loaded)


async def test_bad_roots_and_paths_are_refused_clearly_and_nothing_is_written(
    repo: Path, tmp_path: Path, session: SessionFactory
) -> None:
    with anyio.fail_after(30):
        async with session(repo) as client:
            relative = await client.call_tool("save_session_checkpoint", {"goal": "g", "projectRoot": "code/app"})
            missing = await client.call_tool("load_session_checkpoint", {"projectRoot": str(tmp_path / "gone")})
            outside = await client.call_tool(
                "save_session_checkpoint", {"goal": "g", "modifiedFiles": [{"path": str(tmp_path / "other.txt")}]}
            )
            escaping = await client.call_tool(
                "save_session_checkpoint", {"goal": "g", "modifiedFiles": [{"path": "../sibling/x.ts"}]}
            )

    assert all(r.is_error for r in (relative, missing, outside, escaping))
    assert "projectRoot must be an absolute path" in text_of(relative)
    assert "projectRoot is not an existing directory" in text_of(missing)
    assert "is outside the project root" in text_of(outside)
    assert "../sibling/x.ts is outside the project root" in text_of(escaping)
    assert not (repo / ".claude-checkpoint").exists()


async def test_values_over_the_limits_are_refused_by_the_input_schema(repo: Path, session: SessionFactory) -> None:
    with anyio.fail_after(30):
        async with session(repo) as client:
            long_goal = await client.call_tool("save_session_checkpoint", {"goal": "g" * 501})
            many_tasks = await client.call_tool(
                "save_session_checkpoint",
                {"goal": "g", "tasks": [{"description": f"t{i}", "status": "pending"} for i in range(31)]},
            )
            bad_status = await client.call_tool(
                "save_session_checkpoint", {"goal": "g", "tasks": [{"description": "t", "status": "later"}]}
            )
            bad_mode = await client.call_tool("save_session_checkpoint", {"goal": "g", "mode": "append"})

    for result, field in ((long_goal, "goal"), (many_tasks, "tasks"), (bad_status, "status"), (bad_mode, "mode")):
        assert result.is_error
        assert field in text_of(result)
    assert not (repo / ".claude-checkpoint").exists()


async def test_secrets_in_every_free_text_field_never_reach_the_disk(
    repo: Path, session: SessionFactory, checkpoint_file: Callable[[Path], dict[str, Any]]
) -> None:
    secrets = {
        "goal": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "task": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "summary": "hunter2hunter2",
        "step": "AKIAIOSFODNN7EXAMPLE",
        "decision": "xoxb-1234567890-abcdef",
        "file note": "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "command": "s3cr3t-pw",
        "command note": "sk_live_abcdefghij123",
    }
    arguments = {
        "goal": f"Rotate {secrets['goal']}",
        "tasks": [{"description": f"Revoke {secrets['task']}", "status": "pending"}],
        "summary": f"DB_PASSWORD={secrets['summary']} works",
        "nextSteps": [f"Delete {secrets['step']}"],
        "decisions": [f"Never log {secrets['decision']}"],
        "modifiedFiles": [{"path": "app.env", "note": f"has {secrets['file note']}"}],
        "recentCommands": [{"command": f"mysql --password={secrets['command']}", "note": secrets["command note"]}],
    }

    with anyio.fail_after(30):
        async with session(repo) as client:
            result = await client.call_tool("save_session_checkpoint", arguments)

    on_disk = (repo / ".claude-checkpoint").read_text()
    for secret in secrets.values():
        assert secret not in on_disk
    assert on_disk.count("«redacted»") == 8
    assert checkpoint_file(repo)["meta"] == {"redactions": 8, "truncated": False}
    assert result.structured_content is not None
    assert result.structured_content["counts"]["redactions"] == 8
    assert "Redacted 8 secret-looking value(s)." in result.structured_content["warnings"]


async def test_a_checkpoint_that_is_not_git_ignored_is_warned_about_and_gitignore_is_left_alone(
    tmp_path: Path, git: Git, session: SessionFactory
) -> None:
    project = tmp_path / "unignored"
    project.mkdir()
    git(project, "init", "-q")
    write(project, "README.md", "hello\n")
    git(project, "add", "README.md")
    git(project, "commit", "-qm", "readme")

    with anyio.fail_after(30):
        async with session(project) as client:
            result = await client.call_tool("save_session_checkpoint", {"goal": "g"})

    assert result.structured_content is not None
    (warning,) = result.structured_content["warnings"]
    assert "is not git-ignored: add `.claude-checkpoint*` to .gitignore" in warning
    assert not (project / ".gitignore").exists()


async def test_a_checkpoint_from_a_newer_version_is_refused_and_left_untouched(
    repo: Path, session: SessionFactory, spec_checkpoint: bytes
) -> None:
    newer = json.dumps(json.loads(spec_checkpoint) | {"version": 3}).encode()
    (repo / ".claude-checkpoint").write_bytes(newer)

    with anyio.fail_after(30):
        async with session(repo) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
            saved = await client.call_tool("save_session_checkpoint", {"goal": "overwrite?"})

    assert loaded.is_error
    assert saved.is_error
    assert "has checkpoint version 3, newer than this Checkpoint supports (2)" in text_of(loaded)
    assert "newer than this Checkpoint supports" in text_of(saved)
    assert (repo / ".claude-checkpoint").read_bytes() == newer


async def test_a_corrupt_checkpoint_falls_back_to_the_backup_and_says_so(repo: Path, session: SessionFactory) -> None:
    with anyio.fail_after(30):
        async with session(repo) as client:
            await client.call_tool("save_session_checkpoint", {"goal": "The good one"})
            await client.call_tool("save_session_checkpoint", {"goal": "The newer one"})
            (repo / ".claude-checkpoint").write_text('{"version": 1, "id": ')
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert not loaded.is_error
    assert loaded.structured_content is not None
    assert loaded.structured_content["fromBackup"] is True
    (warning,) = loaded.structured_content["warnings"]
    assert warning.startswith(f"Loaded the backup {repo / '.claude-checkpoint.prev'}")
    assert "The good one" in text_of(loaded)
    assert f"> ⚠ {warning}" in text_of(loaded)


async def test_the_spec_example_file_written_by_the_original_tool_loads(
    repo: Path, session: SessionFactory, spec_checkpoint: bytes
) -> None:
    (repo / ".claude-checkpoint").write_bytes(spec_checkpoint)

    with anyio.fail_after(30):
        async with session(repo) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert not loaded.is_error
    assert "# Resuming: my-app" in text_of(loaded)
    assert "Saved commit b2ef1b591 is no longer reachable from HEAD" in text_of(loaded)
    assert loaded.structured_content is not None
    assert loaded.structured_content["drift"]["commitsSince"] is None


async def test_fifty_concurrent_merge_saves_through_one_server_lose_nothing(
    repo: Path, session: SessionFactory, checkpoint_file: Callable[[Path], dict[str, Any]]
) -> None:
    async def save(client: Any, index: int) -> None:
        result = await client.call_tool(
            "save_session_checkpoint",
            {
                "goal": "Many hands",
                "mode": "merge",
                "tasks": [{"description": f"task {index % 25}", "status": "done"}],
                "recentCommands": [{"command": f"step {index}", "exitCode": 0}],
            },
        )
        assert not result.is_error, text_of(result)

    with anyio.fail_after(60):
        async with session(repo) as client, anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(save, client, index)

    document = checkpoint_file(repo)
    assert sorted(c["command"] for c in document["recentCommands"]) == sorted(f"step {i}" for i in range(50))
    assert sorted(t["description"] for t in document["goal"]["tasks"]) == sorted(f"task {i}" for i in range(25))
    assert document["meta"]["truncated"] is False


async def test_two_servers_on_one_project_take_turns_and_lose_nothing(
    repo: Path, session: SessionFactory, checkpoint_file: Callable[[Path], dict[str, Any]]
) -> None:
    async def save(client: Any, name: str, index: int) -> None:
        arguments = {"goal": "Two servers", "mode": "merge", "recentCommands": [{"command": f"{name} {index}"}]}
        result = await client.call_tool("save_session_checkpoint", arguments)
        assert not result.is_error, text_of(result)

    with anyio.fail_after(60):
        async with session(repo) as first, session(repo) as second, anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(save, first, "first", index)
                group.start_soon(save, second, "second", index)

    commands = sorted(c["command"] for c in checkpoint_file(repo)["recentCommands"])
    assert commands == sorted([f"first {i}" for i in range(20)] + [f"second {i}" for i in range(20)])


async def test_debug_logging_goes_to_stderr_and_never_corrupts_the_wire(repo: Path, session: SessionFactory) -> None:
    with anyio.fail_after(30):
        async with session(repo, options=["--log-level", "debug"]) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "Chatty"})
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert not saved.is_error
    assert "Chatty" in text_of(loaded)


async def test_a_folder_symlinked_out_of_the_project_and_an_empty_project_root_are_refused(
    repo: Path, tmp_path: Path, session: SessionFactory
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    write(outside, "secret.txt", "not the project's\n")
    (repo / "link").symlink_to(outside)
    with anyio.fail_after(30):
        async with session(repo) as client:
            relative = await client.call_tool(
                "save_session_checkpoint", {"goal": "g", "modifiedFiles": [{"path": "link/secret.txt"}]}
            )
            absolute = await client.call_tool(
                "save_session_checkpoint", {"goal": "g", "modifiedFiles": [{"path": str(repo / "link" / "secret.txt")}]}
            )
            empty = await client.call_tool("save_session_checkpoint", {"goal": "g", "projectRoot": ""})
            empty_load = await client.call_tool("load_session_checkpoint", {"projectRoot": ""})

    assert all(r.is_error for r in (relative, absolute, empty, empty_load))
    assert "link/secret.txt is outside the project root" in text_of(relative)
    assert "is outside the project root" in text_of(absolute)
    assert "projectRoot is empty" in text_of(empty)
    assert "projectRoot is empty" in text_of(empty_load)
    assert not (repo / ".claude-checkpoint").exists()


def test_a_save_holding_a_lone_surrogate_is_answered_with_a_clear_refusal_and_writes_nothing(
    repo: Path, hermetic_git: dict[str, str]
) -> None:
    from support import ProxyProcess

    requests = [
        '{"goal":"\\ud800"}',
        '{"goal":"g","modifiedFiles":[{"path":"a\\udc00.txt"}]}',
        '{"goal":"g","tasks":[{"description":"\\udbff","status":"done"}]}',
        '{"goal":"fine"}',
    ]
    with ProxyProcess("session", env=hermetic_git, cwd=repo) as p:
        p.initialize()
        replies = []
        for number, arguments in enumerate(requests, 1):
            if number == len(requests):
                assert not (repo / ".claude-checkpoint").exists()  # nothing written by the refused saves
            line = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"save_session_checkpoint","arguments":%s}}\n'
            p.send_raw((line % (number, arguments)).encode())
            replies.append(p.response(number, timeout=20))
        p.close()
    refused, path, task, fine = (reply["result"] for reply in replies)
    for result, field in ((refused, "goal"), (path, "modifiedFiles[0].path"), (task, "tasks[0].description")):
        assert result["isError"] is True
        assert f"{field} is not valid Unicode: it holds a lone surrogate" in result["content"][0]["text"]
    assert fine.get("isError") is not True
    assert (repo / ".claude-checkpoint").exists()
