"""CHECKPOINT_PORTABLE=1: `checkpoint` takes, on Linux, the paths macOS and Windows take, and what can be seen of
the processes says so. The upstream leads its own process group below the proxy itself (no keeper, no subreaper,
no pidfd); an orphan of its tree lives outside the proxy's tree yet dies with it, SIGKILLed or left; threads pump
the pipes (no epoll instance watches one); locks are byte-range locks on lock files (no FLOCK in /proc/locks); the
exit codes are the native ones, whoever is blocked on stdin. Each check also runs on the native path, where it
must see the opposite: a probe that could not tell the two apart would prove nothing."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gatewayproc import GatewayProcess

from support import ProxyProcess, read_effects, server_cmd, wait_until

PORTABLE = {"CHECKPOINT_PORTABLE": "1"}
GONE_WITHIN = 5.0


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, …); None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def tree_of(root: int) -> set[int]:
    """``root`` and every living process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = {root}, [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.add(child)
            frontier.append(child)
    return {pid for pid in found if alive(pid)}


def links(pid: int) -> dict[int, str]:
    """fd -> what it points at, for every descriptor of ``pid``."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
    return found


def pipes_watched_by_epoll(pid: int) -> list[str]:
    """The pipes that some epoll instance of ``pid`` watches (from /proc/PID/fdinfo's ``tfd:`` lines)."""
    fds = links(pid)
    watched = []
    for fd, target in fds.items():
        if target != "anon_inode:[eventpoll]":
            continue
        for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines():
            if line.startswith("tfd:"):
                watched_fd = int(line.split()[1])
                if fds.get(watched_fd, "").startswith("pipe:"):
                    watched.append(fds[watched_fd])
    return watched


def flocks_held_by(pids: set[int]) -> list[str]:
    """The FLOCK lines of /proc/locks held by one of ``pids``."""
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        words = line.split()
        if "->" in words:
            continue  # a waiter, not a holder
        if len(words) > 4 and words[1] == "FLOCK" and int(words[4]) in pids:
            held.append(line)
    return held


def locks_on(inode: int) -> list[str]:
    """The kinds (FLOCK, OFDLCK, POSIX) of the locks held on the file with this inode."""
    return [
        line.split()[1]
        for line in Path("/proc/locks").read_text().splitlines()
        if line.split()[5].endswith(f":{inode}")
    ]


@pytest.mark.parametrize("portable", [True, False], ids=["portable", "native"])
def test_the_portable_proxy_runs_no_keeper_pidfd_epoll_on_pipes_or_flock(tmp_path: Path, portable: bool) -> None:
    journal = tmp_path / "j.db"
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), **(PORTABLE if portable else {})}
    with ProxyProcess("--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(journal), env=env) as p:
        p.initialize()
        assert "result" in p.call("send_email", {"to": "a@example.com"})
        proxy = p.proc.pid
        server = read_effects(tmp_path / "effects.jsonl")[0]["pid"]
        server_stat = stat_fields(server)
        assert server_stat is not None
        group, session = int(server_stat[2]), int(server_stat[3])
        leader = stat_fields(group)
        assert leader is not None
        proxy_stat = stat_fields(proxy)
        assert proxy_stat is not None
        tree = tree_of(proxy)
        lock = next((journal.parent / "j.db.owners").glob("*.lock"))
        held = locks_on(lock.stat().st_ino)
        if portable:
            assert group not in (int(proxy_stat[2]), proxy)  # its own process group, in a session of its own
            assert session == group
            assert int(leader[1]) == proxy  # the shell is the proxy's own child: no keeper between them
            assert "anon_inode:[pidfd]" not in links(proxy).values()
            assert pipes_watched_by_epoll(proxy) == []
            assert flocks_held_by(tree) == []
            assert held == ["OFDLCK"]  # the workflow is owned all the same
        else:
            assert int(leader[1]) != proxy  # the keeper is
            assert "anon_inode:[pidfd]" in links(proxy).values()
            assert len(pipes_watched_by_epoll(proxy)) >= 2
            assert flocks_held_by(tree) != []
            assert held == ["FLOCK"]
        assert p.close() == 0


@pytest.mark.parametrize("how", ["proxy SIGKILLed", "stdin closed"])
def test_an_orphan_of_the_portable_upstream_lives_outside_the_proxy_tree_and_goes_with_the_proxy(
    tmp_path: Path, how: str
) -> None:
    orphan_file = tmp_path / "orphan.pid"
    upstream = f"(sleep 300 & echo $! > {shlex.quote(str(orphan_file))}); exec {server_cmd('effects_server.py')}"
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), **PORTABLE}
    with ProxyProcess("--upstream-cmd", upstream, env=env) as p:
        p.initialize()
        wait_until(lambda: orphan_file.exists() and orphan_file.read_text().strip() != "", what="the orphan's pid")
        orphan = int(orphan_file.read_text())
        orphan_stat = stat_fields(orphan)
        assert orphan_stat is not None
        p.call("send_email", {})
        server = read_effects(tmp_path / "effects.jsonl")[0]["pid"]
        assert orphan not in tree_of(p.proc.pid)  # re-parented outside the proxy's tree: no subreaper holds it
        assert int(orphan_stat[2]) == int(stat_fields(server)[2])  # type: ignore[index]  # yet in the group
        started = time.monotonic()
        if how == "proxy SIGKILLed":
            p.kill()
        else:
            assert p.close() == 0
        wait_until(lambda: not alive(orphan) and not alive(server), timeout=GONE_WITHIN, what="the upstream's tree")
        assert time.monotonic() - started < GONE_WITHIN


def started_proxy(tmp_path: Path) -> ProxyProcess:
    p = ProxyProcess(
        "--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db"), env=PORTABLE
    )
    p.initialize()
    return p


def started_session(tmp_path: Path) -> ProxyProcess:
    p = ProxyProcess("session", env={**PORTABLE, "CHECKPOINT_PROJECT_ROOT": str(tmp_path)})
    p.initialize()
    return p


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["proxy", "session", "serve"])
def test_a_portable_command_ends_with_128_plus_the_signal_while_its_stdin_stays_open(
    tmp_path: Path, command: str, signum: int
) -> None:
    if command == "serve":
        gateway = GatewayProcess("--upstream-cmd", server_cmd("effects_server.py"), env=PORTABLE)
        try:
            started = time.monotonic()
            code = gateway.terminate(timeout=GONE_WITHIN * 2) if signum == signal.SIGTERM else _interrupt(gateway.proc)
        finally:
            gateway.kill()
    else:
        # Its stdin is a pipe we never close: a thread of it is blocked reading it.
        with started_proxy(tmp_path) if command == "proxy" else started_session(tmp_path) as process:
            started = time.monotonic()
            process.proc.send_signal(signum)
            code = process.wait(timeout=GONE_WITHIN * 2)
    assert time.monotonic() - started < GONE_WITHIN
    assert code == 128 + signum


def _interrupt(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=GONE_WITHIN * 2)
