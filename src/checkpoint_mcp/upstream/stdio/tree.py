"""What the proxy holds of a local upstream, whichever way its process tree is kept (``process.spawn`` chooses).

Three ways, one per platform (``platforms.host.Tree``): a keeper process that is a child subreaper (Linux,
``keeper.py``), the shell's own process group and a watchdog process (macOS, BSD, and Linux under
``CHECKPOINT_PORTABLE=1``: ``group.py``), a Job Object (Windows: ``job.py``). Each one promises the same: the
whole tree goes when the proxy goes, SIGKILL included, and ``kill_tree`` takes it all down now.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import IO, Protocol

from checkpoint_mcp.platforms import commands


class LocalProcess(Protocol):
    """The proxy's handle on a local upstream: its pipes, the process to wait for, its tree to end."""

    pid: int
    """The shell: the upstream's first process (and, on POSIX, its process group's id)."""
    stdin: IO[bytes]
    stdout: IO[bytes]
    returncode: int | None
    """How the waited process ended, once ``wait`` returned (negative: killed by that signal)."""

    @property
    def keeps_tree(self) -> bool:
        """True when ``wait`` returns only once no process of the tree is left (a keeper's exit)."""
        ...

    @property
    def watched_pid(self) -> int | None:
        """The process a pidfd may watch for the exit ``wait`` waits for; None: wait on a thread."""
        ...

    def wait(self) -> int:
        """Block until the waited process exits; its returncode."""
        ...

    def terminate(self) -> None:
        """Ask the whole tree to stop (SIGTERM to its process group; where there is no such signal, end it)."""
        ...

    def kill_tree(self) -> None:
        """Kill every process of the tree, now."""
        ...

    def tree_alive(self) -> bool:
        """Whether some process of the tree may still be running (after ``kill_tree``, zombies do not count)."""
        ...

    def writer_left(self) -> bool:
        """Whether some process of the tree may still write to our end of its stdout (unknown counts as yes)."""
        ...

    def close(self) -> None:
        """Let go of what holds the tree (the tree is gone, or is being let go with the proxy)."""
        ...


class PopenTree:
    """What the group and job ways share (``group.GroupTree``, ``job.JobTree``): a shell started by ``Popen``, whose
    own exit says nothing of its tree, and whose tree's writers cannot be told."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None
        assert popen.stdout is not None
        self._popen = popen
        self.pid = popen.pid
        self.stdin: IO[bytes] = popen.stdin
        self.stdout: IO[bytes] = popen.stdout
        self.returncode: int | None = None

    @property
    def keeps_tree(self) -> bool:
        """Never: the first process's exit says nothing of the rest of the tree."""
        return False

    def wait(self) -> int:
        """Block until the first process exits; its returncode."""
        self.returncode = self._popen.wait()
        return self.returncode

    def writer_left(self) -> bool:
        """Unknown here: yes."""
        return True


def popen_shell(
    command: str,
    environ: Mapping[str, str] | None,
    *,
    cwd: str | None,
    quiet: bool,
    new_session: bool = False,
    creationflags: int = 0,
) -> subprocess.Popen[bytes]:
    """Start ``command`` with the platform's shell, with pipes for its stdin and stdout (``environ``: its whole
    environment, None: ours; ``quiet``: its stderr goes nowhere; ``new_session``: POSIX's session and process group
    of its own; ``creationflags``: Windows').

    Raises:
        OSError: the shell could not be started.
    """
    return subprocess.Popen(
        commands.shell_args(command),
        env=environ,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None,
        start_new_session=new_session,
        creationflags=creationflags,
        bufsize=0,
    )
