"""`checkpoint init` then one call, as a user on a machine with the usual umask (or none) does it: the folder init
creates for the journal and the originals is owner-only, and so is the journal the wrapped server then writes."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support import SERVERS, ProxyProcess, checkpoint_argv, with_umask


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask 022", "umask 000"])
def test_init_makes_the_state_folder_owner_only_and_the_wrapped_server_journals_owner_only(
    tmp_path: Path, umask: int
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    effects = tmp_path / "effects.jsonl"
    entry = {
        "command": sys.executable,
        "args": [str(SERVERS / "effects_server.py")],
        "env": {"EFFECTS_FILE": str(effects)},
    }
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"mail": entry}}))

    done = subprocess.run(
        with_umask(umask, checkpoint_argv("init", "--project", str(project))),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    state = project / ".checkpoint"
    [run] = (state / "init").iterdir()
    assert (mode(state), mode(state / "init"), mode(run)) == (0o700, 0o700, 0o700)

    wrapped = json.loads((project / ".mcp.json").read_text())["mcpServers"]["mail"]
    with ProxyProcess(
        *wrapped["args"], command=[wrapped["command"]], env=wrapped["env"], cwd=project, umask=umask
    ) as proxy:
        proxy.initialize()
        assert proxy.call("send_email", {"to": "a@example.com"})["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
        journal = state / "journal.db"
        files = [journal, Path(f"{journal}-wal"), Path(f"{journal}-shm")]
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
        assert proxy.close() == 0
