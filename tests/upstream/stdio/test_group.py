"""The process group path (macOS, BSD; Linux under CHECKPOINT_PORTABLE=1): its wait is bounded and knows macOS's
EPERM for a group of zombies, and its watchdog takes the group down when the proxy's end of its pipe closes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from checkpoint_mcp.upstream.stdio import group


def test_eperm_from_a_killed_group_means_zombies_and_counts_as_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    def eperm(pgid: int, signum: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(group.os, "killpg", eperm)
    assert group.group_alive(12345)  # before the kill: someone we may not signal may still be running
    assert not group.group_alive(12345, killed=True)


def test_the_watchdog_kills_the_group_when_the_proxy_end_of_its_pipe_closes(tmp_path: Path) -> None:
    tree = group.spawn("sleep 300 & exec sleep 300")
    try:
        assert tree.tree_alive()
        assert tree._watchdog is not None
        watchdog, guard = tree._watchdog
        os.close(guard)  # as when the proxy dies, however it dies
        deadline = time.monotonic() + 5
        while tree.tree_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not tree.tree_alive()
        assert watchdog.wait(timeout=5) == 0
    finally:
        tree.kill_tree()
        tree.wait()
        tree.stdin.close()
        tree.stdout.close()
