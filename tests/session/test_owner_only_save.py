"""The checkpoint file names the agent's goal, decisions and commands: a real session server saves it owner-only
(0600) whatever its umask, the backup too, because the temp file it renames is created 0600."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import SessionFactory
from .helpers import text_of

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask 022", "umask 000"])
async def test_a_save_under_any_umask_writes_the_checkpoint_and_its_backup_owner_only(
    repo: Path, session: SessionFactory, spec_save_arguments: dict[str, Any], umask: int
) -> None:
    with anyio.fail_after(30):
        async with session(repo, umask=umask) as client:
            for _ in range(2):  # the second save keeps the first as the backup
                saved = await client.call_tool("save_session_checkpoint", spec_save_arguments)
                assert not saved.is_error, text_of(saved)

    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in repo.glob(".claude-checkpoint*")}
    assert files == {".claude-checkpoint": 0o600, ".claude-checkpoint.prev": 0o600}
