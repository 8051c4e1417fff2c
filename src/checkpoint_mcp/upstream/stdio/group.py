"""The upstream's process tree where there is no subreaper (macOS, BSD; Linux under ``CHECKPOINT_PORTABLE=1``).

The shell leads a process group of its own, in a session of its own (no terminal's signals reach it), and its
descendants stay in that group unless they leave it on purpose (``setsid``: such a process is beyond reach here,
as it is for every process supervisor without a subreaper). A *watchdog* takes the group down with the proxy:

* it is a small interpreter of its own (``python -I -S -c``, started by ``posix_spawn``, not a fork: the gateway
  starts upstreams while threads run), in a session of its own, outside the upstream's group and tree;
* its stdin is a pipe whose only writer is the proxy. When the proxy dies, however it dies, the kernel closes
  that end, the watchdog reads EOF, SIGKILLs the group and exits. A proxy that ends the upstream itself sends one
  byte first (``stand_down``), and the watchdog exits without killing anything.

The wait for the group is bounded and knows macOS's answers: ``killpg`` says EPERM for a group of zombies (the
exited members that launchd has not reaped yet), so once the group has been SIGKILLed, EPERM means gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Final

from checkpoint_mcp.upstream.stdio import procfs
from checkpoint_mcp.upstream.stdio.tree import PopenTree, popen_shell

assert sys.platform != "win32", "process groups are POSIX's (process.spawn chooses)"

STAND_DOWN: Final = b"x"
WATCHDOG_EXIT_SECONDS: Final = 1.0  # how long a watchdog told to stand down is waited for
_WATCHDOG: Final = """
import os, signal, sys
group = int(sys.argv[1])
try:
    said = os.read(0, 1)
except OSError:
    said = b""
if said != b"x":
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class GroupTree(PopenTree):
    """A local upstream leading its own process group (``tree.LocalProcess``), guarded by a watchdog (or not)."""

    def __init__(self, popen: subprocess.Popen[bytes], watchdog: tuple[subprocess.Popen[bytes], int] | None) -> None:
        super().__init__(popen)
        self._watchdog = watchdog  # the watchdog, and our end of its pipe
        self._killed = False

    @property
    def watched_pid(self) -> int | None:
        """The shell (a pidfd only where ``host`` allows it)."""
        return self.pid

    def terminate(self) -> None:
        """SIGTERM to the group."""
        signal_group(self.pid, signal.SIGTERM)

    def kill_tree(self) -> None:
        """SIGKILL to the group."""
        self._killed = True
        signal_group(self.pid, signal.SIGKILL)

    def tree_alive(self) -> bool:
        """Whether some member of the group is still running (zombies do not count)."""
        return group_alive(self.pid, killed=self._killed)

    def close(self) -> None:
        """Tell the watchdog the group is ended (or, if it is not, leave the rest to it), and reap it."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            process, guard = watchdog
            if not self.tree_alive():  # else the EOF alone: the watchdog kills what is left
                with contextlib.suppress(OSError):
                    os.write(guard, STAND_DOWN)
            os.close(guard)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(WATCHDOG_EXIT_SECONDS)


def spawn(
    command: str,
    environ: Mapping[str, str] | None = None,
    *,
    cwd: str | None = None,
    quiet: bool = False,
    watchdog: bool = True,
) -> GroupTree:
    """Start ``command`` with the platform's shell, leading a process group of its own, with pipes for its stdin and
    stdout (``environ``: its whole environment, None: ours; ``cwd``: its folder; ``quiet``: its stderr goes
    nowhere; ``watchdog``: a watchdog takes the group down if we die first).

    Raises:
        OSError: the shell (or its watchdog) could not be started.
    """
    popen = popen_shell(command, environ, cwd=cwd, quiet=quiet, new_session=True)
    guard = None
    if watchdog:
        try:
            guard = _start_watchdog(popen.pid)
        except OSError:
            signal_group(popen.pid, signal.SIGKILL)
            popen.wait()
            raise
    return GroupTree(popen, guard)


def _start_watchdog(group: int) -> tuple[subprocess.Popen[bytes], int]:
    """Start the watchdog of ``group``: it, and our end of its pipe (its only writer).

    Raises:
        OSError: it could not be started.
    """
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(group)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    return process, write_end


def signal_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to process group ``pgid``, if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def group_alive(pgid: int, *, killed: bool = False) -> bool:
    """True while some process of group ``pgid`` is still running.

    Zombies do not count: an orphaned member that has exited waits for init (or launchd) to reap it, which may
    take a while, but it can no longer do anything. Linux's ``/proc`` tells them apart; elsewhere ``killpg``
    answers EPERM for a group of zombies, which counts as gone once the group was SIGKILLed (``killed``).
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return not killed
    if not procfs.has_proc():
        return True
    return any(
        len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
        for _, fields in procfs.process_stats()
    )
