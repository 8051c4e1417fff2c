"""`checkpoint init` and the start of every Claude Code session: the brief hook's matcher, its repair by a later
`init`, and the session checkpoint file kept out of git. Real `checkpoint init` processes on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .entries import run_init

BRIEF = f"{sys.executable} -m checkpoint_mcp brief --hook"
SOURCES = {"startup", "resume", "clear", "compact"}
"""Every SessionStart source of Claude Code (``claude -p --continue`` starts with ``resume``)."""


def init_ok(*args: str) -> str:
    done = run_init(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def session_start(project: Path) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = json.loads((project / ".claude" / "settings.json").read_text())["hooks"][
        "SessionStart"
    ]
    return groups


def test_the_brief_hook_runs_at_every_way_claude_code_starts_a_session(tmp_path: Path) -> None:
    init_ok("--project", str(tmp_path))
    (group,) = session_start(tmp_path)
    assert group["hooks"][0]["command"] == BRIEF
    assert set(group["matcher"].split("|")) == SOURCES


def test_a_later_init_widens_the_matcher_an_older_init_wrote_and_leaves_the_users_hooks(tmp_path: Path) -> None:
    init_ok("--project", str(tmp_path))
    settings_path = tmp_path / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    ours = settings["hooks"]["SessionStart"][0]
    ours["matcher"] = "startup|clear|compact"  # what init wrote before `resume` was added
    users = [
        {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]},
        # The user's own group that happens to hold the brief too: not init's, so not init's to change.
        {"matcher": "clear", "hooks": [{"type": "command", "command": BRIEF}, {"type": "command", "command": "true"}]},
    ]
    settings["hooks"]["SessionStart"] += users
    settings_path.write_text(json.dumps(settings, indent=2) + "\n")
    old = settings_path.read_bytes()

    out = init_ok("--project", str(tmp_path))
    assert "widened the SessionStart hook's matcher" in out
    repaired, *rest = session_start(tmp_path)
    assert set(repaired["matcher"].split("|")) == SOURCES
    assert repaired["hooks"] == ours["hooks"]
    assert rest == users
    assert "nothing to change" in init_ok("--project", str(tmp_path))

    init_ok("--undo", "--project", str(tmp_path))
    # --undo goes back to before the first init (no settings file), keeping the version edited in between beside.
    assert not settings_path.exists()
    [aside] = [p for p in settings_path.parent.iterdir() if ".checkpoint-undo-" in p.name]
    assert aside.read_bytes() == old


def test_init_git_ignores_the_session_checkpoint_file_and_its_siblings(tmp_path: Path) -> None:
    git = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # no global excludes
    subprocess.run(["git", "init", "-q", str(tmp_path)], env=git, check=True, timeout=30)
    (tmp_path / ".gitignore").write_bytes(b"node_modules")  # no newline at the end
    out = init_ok("--project", str(tmp_path))
    assert "added '/.claude-checkpoint*' to .gitignore" in out
    assert (tmp_path / ".gitignore").read_text().startswith("node_modules\n# Written by `checkpoint init`")
    names = [".claude-checkpoint", ".claude-checkpoint.prev", ".claude-checkpoint.tmp-1234", "node_modules"]
    argv = ["git", "check-ignore", "--no-index", *names]
    ignored = subprocess.run(argv, cwd=tmp_path, env=git, capture_output=True, text=True, timeout=30, check=False)
    assert ignored.stdout.split() == names
    assert "nothing to change" in init_ok("--project", str(tmp_path))
    init_ok("--undo", "--project", str(tmp_path))
    assert (tmp_path / ".gitignore").read_bytes() == b"node_modules"
