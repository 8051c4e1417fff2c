"""`checkpoint brief` and `checkpoint session` as commands: real processes, and no MCP SDK on the brief path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp.session import service
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .helpers import write


def _checkpoint(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "checkpoint_mcp", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _save(root: Path, goal: str) -> None:
    service.save(SaveRequest(goal=goal, decisions=("Keep the hook fast",)), ProjectRoot(str(root), RootSource.ARGUMENT))


def test_brief_prints_the_resume_brief_of_the_named_project(repo: Path, tmp_path: Path) -> None:
    _save(repo, "Ship the hook")
    write(repo, "late.txt", "edited after the save\n")

    result = _checkpoint(tmp_path, "brief", "--project-root", str(repo))

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# Resuming: my-app (checkpoint saved just now, ")
    assert lines[1].startswith("Branch `main` @ ")
    assert "## Goal\nShip the hook\n" in result.stdout
    assert "- ⚠ Changed after the checkpoint, re-read before editing: `late.txt`" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("variable", ["CHECKPOINT_PROJECT_ROOT", "CLAUDE_PROJECT_DIR"])
def test_brief_finds_the_project_from_the_environment(repo: Path, tmp_path: Path, variable: str) -> None:
    _save(repo, "From the environment")

    result = _checkpoint(tmp_path, "brief", env={variable: str(repo)})

    assert result.returncode == 0, result.stderr
    assert "From the environment" in result.stdout


def test_brief_defaults_to_the_working_directory(repo: Path) -> None:
    _save(repo, "Right here")

    assert "Right here" in _checkpoint(repo, "brief").stdout


def test_brief_format_full_prints_the_checkpoint_json_plus_drift(repo: Path) -> None:
    _save(repo, "Everything")

    result = _checkpoint(repo, "brief", "--format", "full")

    document = json.loads(result.stdout)
    assert document["checkpoint"]["goal"]["primary"] == "Everything"
    assert document["drift"]["commitsSince"] == 0


def test_brief_hook_prints_session_start_json_carrying_the_brief(repo: Path) -> None:
    _save(repo, "Resume me at start-up")

    result = _checkpoint(repo, "brief", "--hook")

    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert set(output) == {"hookSpecificOutput"}
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = output["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Resuming: my-app")
    assert "Resume me at start-up" in context


def test_nothing_to_resume_is_one_short_line_and_exit_zero(repo: Path) -> None:
    plain = _checkpoint(repo, "brief")
    hook = _checkpoint(repo, "brief", "--hook")

    assert (plain.returncode, hook.returncode) == (0, 0)
    assert plain.stdout == f"No checkpoint at {repo / '.claude-checkpoint'}: nothing to resume.\n"
    assert json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"] == plain.stdout.rstrip("\n")


def test_brief_reports_an_unusable_project_root_as_an_error(tmp_path: Path) -> None:
    result = _checkpoint(tmp_path, "brief", "--project-root", str(tmp_path / "missing"))

    assert result.returncode == 1
    assert result.stdout == ""
    assert "Error: --project-root is not an existing directory" in result.stderr


def test_brief_reports_a_checkpoint_it_cannot_read_as_an_error(repo: Path) -> None:
    (repo / ".claude-checkpoint").write_text("not json")

    result = _checkpoint(repo, "brief")

    assert result.returncode == 1
    assert "is unusable (not valid JSON" in result.stderr


def test_brief_never_imports_the_mcp_sdk_or_pydantic(repo: Path) -> None:
    _save(repo, "Fast start")

    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "checkpoint_mcp", "brief", "--hook"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert "checkpoint_mcp.session.service" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in {"mcp", "mcp_types", "pydantic", "pydantic_core"})
    assert heavy == []


@pytest.mark.parametrize("command", ["session", "brief"])
def test_the_session_commands_have_help_text(tmp_path: Path, command: str) -> None:
    result = _checkpoint(tmp_path, command, "--help")

    assert result.returncode == 0
    summary = result.stdout.split("\n\n")[1].strip()
    assert len(summary) > 40
