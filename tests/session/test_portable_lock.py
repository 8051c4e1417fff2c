"""Under CHECKPOINT_PORTABLE=1 the session server locks the project as Windows does, with a lock file in the user's
state folder instead of flock on the folder: a save completes while another process holds flock on the project
folder (which would hold up a native save), and nothing is added to the project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import SessionFactory
from .helpers import text_of

pytestmark = pytest.mark.anyio

HOLD_FLOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


async def test_a_portable_save_completes_while_another_process_holds_flock_on_the_project_folder(
    repo: Path, tmp_path: Path, session: SessionFactory, spec_save_arguments: dict[str, Any]
) -> None:
    state = tmp_path / "state"
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_FLOCK, str(repo)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdin is not None
        try:
            assert holder.stdout.readline().strip() == "locked"
            with anyio.fail_after(30):
                env = {"CHECKPOINT_PORTABLE": "1", "XDG_STATE_HOME": str(state)}
                async with session(repo, env=env) as client:
                    saved = await client.call_tool("save_session_checkpoint", spec_save_arguments)
                    assert not saved.is_error, text_of(saved)
                    loaded = await client.call_tool("load_session_checkpoint", {})
                    assert not loaded.is_error, text_of(loaded)
        finally:
            holder.stdin.close()
            holder.wait(timeout=10)
    assert sorted(path.name for path in repo.iterdir()) == [".claude-checkpoint", ".git", ".gitignore"]
    assert len(list((state / "checkpoint" / "locks").glob("*.lock"))) == 1
