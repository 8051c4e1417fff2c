"""`checkpoint init` and `init --undo` killed (SIGKILL) at named points: `--undo` afterwards always gives back the
original files byte for byte, and an undo cut short finishes when run again."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .entries import run_init
from .test_cli_init import HOSTILE_MCP_JSON, SETTINGS_JSON, folders, snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".mcp.json").write_text(HOSTILE_MCP_JSON)
    (tmp_path / ".claude" / "settings.json").write_text(SETTINGS_JSON)
    return tmp_path


@pytest.mark.parametrize(
    "point", ["init.run_recorded", "init.file_written@1", "init.file_written@2", "init.file_written@3"]
)
def test_init_killed_at_any_point_is_undone_to_the_original_bytes(project: Path, point: str) -> None:
    before, dirs = snapshot(project), folders(project)
    killed = run_init("--project", str(project), env={"CHECKPOINT_DEBUG_TRIGGER": point})
    assert killed.returncode == -signal.SIGKILL
    if point == "init.file_written@1":
        assert (project / ".mcp.json").read_text() != HOSTILE_MCP_JSON
        assert (project / ".claude" / "settings.json").read_text() == SETTINGS_JSON
    undone = run_init("--undo", "--project", str(project))
    assert undone.returncode == 0, undone.stderr
    assert snapshot(project) == before
    assert folders(project) == dirs


def test_an_undo_killed_half_way_finishes_when_run_again(project: Path) -> None:
    before, dirs = snapshot(project), folders(project)
    assert run_init("--project", str(project)).returncode == 0
    killed = run_init("--undo", "--project", str(project), env={"CHECKPOINT_DEBUG_TRIGGER": "init.file_restored@1"})
    assert killed.returncode == -signal.SIGKILL
    assert (project / ".mcp.json").read_text() == HOSTILE_MCP_JSON
    assert (project / ".claude" / "settings.json").read_text() != SETTINGS_JSON
    again = run_init("--undo", "--project", str(project))
    assert again.returncode == 0, again.stderr
    assert "kept as" not in again.stdout, "a file already restored is not an edit to keep aside"
    assert snapshot(project) == before
    assert folders(project) == dirs
