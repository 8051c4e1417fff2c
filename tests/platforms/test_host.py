"""The one choice of paths: each platform's, and Linux's under CHECKPOINT_PORTABLE=1 (the macOS and Windows paths
that can run here), pinned as a table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkpoint_mcp.platforms.host import Locks, Tree, choose

PORTABLE = {"CHECKPOINT_PORTABLE": "1"}
PACKAGE = Path(__file__).resolve().parents[2] / "src" / "checkpoint_mcp"


@pytest.mark.parametrize(
    ("platform", "environ", "expected"),
    [
        ("linux", {}, (Tree.KEEPER, True, True, True, Locks.FLOCK, True, True, False, False)),
        ("linux", PORTABLE, (Tree.GROUP, False, False, False, Locks.RANGE, True, True, False, False)),
        ("darwin", {}, (Tree.GROUP, False, True, True, Locks.FLOCK, True, True, True, False)),
        ("darwin", PORTABLE, (Tree.GROUP, False, False, False, Locks.FLOCK, True, True, True, False)),
        ("freebsd14", {}, (Tree.GROUP, False, True, True, Locks.FLOCK, True, True, False, False)),
        ("win32", {}, (Tree.JOB, False, False, False, Locks.RANGE, False, False, False, True)),
        ("win32", PORTABLE, (Tree.JOB, False, False, False, Locks.RANGE, False, False, False, True)),
    ],
)
def test_each_platform_takes_its_own_path_through_every_seam(
    platform: str, environ: dict[str, str], expected: tuple[object, ...]
) -> None:
    host = choose(platform, environ)
    assert (
        host.tree,
        host.pidfd,
        host.loop_pipes,
        host.loop_signals,
        host.locks,
        host.modes,
        host.sync_folders,
        host.full_fsync,
        host.windows_commands,
    ) == expected


def test_only_the_value_1_asks_for_the_portable_paths() -> None:
    assert not choose("linux", {"CHECKPOINT_PORTABLE": "0"}).portable
    assert not choose("linux", {"CHECKPOINT_PORTABLE": ""}).portable
    assert choose("linux", PORTABLE).portable


# Where ``sys.platform`` may be read: the choice itself, and the modules that hold one platform's primitives (a
# branch per platform, or an assertion, that the type checker needs to check each platform's calls).
READS_THE_PLATFORM = {
    "platforms/host.py": "the one choice",
    "platforms/locks.py": "flock, open file description locks, LockFileEx",
    "platforms/files.py": "fchmod, F_FULLFSYNC",
    "platforms/signals.py": "SIGBREAK, SIGKILL",
    "platforms/stdio.py": "epoll",
    "upstream/stdio/process.py": "which tree module to import (Windows' is typed for Windows only)",
    "upstream/stdio/procfs.py": "pidfd_open",
    "upstream/stdio/keeper.py": "POSIX only",
    "upstream/stdio/group.py": "POSIX only",
    "upstream/stdio/job.py": "Windows only",
}


def test_no_module_outside_the_seams_asks_which_platform_it_runs_on() -> None:
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "platform"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                readers.add(str(path.relative_to(PACKAGE)))
    assert readers == set(READS_THE_PLATFORM), readers ^ set(READS_THE_PLATFORM)
