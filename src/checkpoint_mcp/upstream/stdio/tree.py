"""What the proxy holds of a local upstream, whichever way its process tree is kept (``process.spawn`` chooses).

Three ways, one per platform (``platforms.host.Tree``): a keeper process that is a child subreaper (Linux,
``keeper.py``), the shell's own process group and a watchdog process (macOS, BSD, and Linux under
``CHECKPOINT_PORTABLE=1``: ``group.py``), a Job Object (Windows: ``job.py``). Each one promises the same: the
whole tree goes when the proxy goes, SIGKILL included, and ``kill_tree`` takes it all down now.
"""

from __future__ import annotations

from typing import IO, Protocol


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
