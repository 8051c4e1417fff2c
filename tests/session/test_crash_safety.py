"""SIGKILL during a save, at each named point: the next load still finds a complete, valid checkpoint."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from checkpoint_mcp.session import model

from .conftest import SessionFactory
from .helpers import text_of

pytestmark = pytest.mark.anyio

# The client sees its server vanish mid-call; the SDK reports it from inside its nested task groups.
SERVER_KILLED = pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="Connection closed"), flatten_subgroups=True)


@pytest.mark.parametrize(
    ("point", "survivor", "backup"),
    [
        # Killed while refreshing the backup: the main file is untouched.
        ("save.backup.temp_written", "first", None),
        ("save.backup.renamed", "first", "first"),
        # Killed while replacing the main file: before the rename the old one stands, after it the new one.
        ("save.main.temp_written", "first", "first"),
        ("save.main.renamed", "second", "first"),
    ],
)
async def test_a_save_killed_at_a_named_point_leaves_a_valid_checkpoint(
    repo: Path, session: SessionFactory, point: str, survivor: str, backup: str | None
) -> None:
    with anyio.fail_after(60):
        async with session(repo) as client:
            await client.call_tool("save_session_checkpoint", {"goal": "first"})

        with SERVER_KILLED:
            async with session(repo, env={"CHECKPOINT_DEBUG_TRIGGER": point}) as client:
                await client.call_tool("save_session_checkpoint", {"goal": "second"})

        async with session(repo) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
            assert loaded.structured_content is not None
            assert (loaded.structured_content["found"], loaded.structured_content["fromBackup"]) == (True, False)
            assert f"## Goal\n{survivor}\n" in text_of(loaded)
            kept = repo / ".claude-checkpoint.prev"
            assert (model.parse(kept.read_bytes()).goal if kept.exists() else None) == backup

            again = await client.call_tool("save_session_checkpoint", {"goal": "third"})
            assert not again.is_error

    leftovers = [p.name for p in repo.iterdir() if p.name.startswith(".claude-checkpoint.tmp-")]
    assert leftovers == []
    assert model.parse((repo / ".claude-checkpoint").read_bytes()).goal == "third"
    assert model.parse((repo / ".claude-checkpoint.prev").read_bytes()).goal == survivor


async def test_a_first_save_killed_before_its_rename_leaves_nothing_half_written(
    repo: Path, session: SessionFactory
) -> None:
    with anyio.fail_after(60):
        with SERVER_KILLED:
            async with session(repo, env={"CHECKPOINT_DEBUG_TRIGGER": "save.main.temp_written"}) as client:
                await client.call_tool("save_session_checkpoint", {"goal": "never landed"})

        async with session(repo) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert not loaded.is_error
    assert loaded.structured_content is not None
    assert loaded.structured_content["found"] is False
    assert not (repo / ".claude-checkpoint").exists()


async def test_a_kill_on_a_later_save_keeps_the_earlier_saves_of_the_same_server(
    repo: Path, session: SessionFactory
) -> None:
    with anyio.fail_after(60):
        with SERVER_KILLED:
            async with session(repo, env={"CHECKPOINT_DEBUG_TRIGGER": "save.main.temp_written@3"}) as client:
                for goal in ("one", "two", "three"):
                    await client.call_tool("save_session_checkpoint", {"goal": goal, "mode": "merge"})

        async with session(repo) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})

    assert "## Goal\ntwo\n" in text_of(loaded)
    # The third save had already refreshed the backup from the second when it was killed.
    assert model.parse((repo / ".claude-checkpoint.prev").read_bytes()).goal == "two"
