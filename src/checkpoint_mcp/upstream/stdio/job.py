"""The upstream's process tree on Windows: a Job Object that kills every member when its last handle closes.

``cmd.exe /c npx …`` makes a tree (cmd → npx.cmd → node) that a plain ``TerminateProcess`` of the first process
would leave running. So, as the MCP SDK does (``mcp/os/win32/utilities.py``), each upstream goes into a Job
Object of its own, created with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: its children join it as they start, and
when the proxy dies, however it dies, Windows closes the proxy's handle and kills the whole job. Since Windows 8
jobs nest: a proxy that runs inside its client's job (Claude Desktop's, a terminal's) puts the upstream in a job
inside that one, without asking to break away from it.

The process is assigned to the job just after it starts (``Popen`` cannot start it suspended): a child that the
shell starts within that instant would land outside the job, a window ``cmd.exe``'s own start-up keeps closed in
practice. Windows has no group-wide SIGTERM: the stdin close the proxy begins with is the server's chance to exit
cleanly, and ``terminate`` ends the job. The calls are pywin32's; the tests drive this module against a fake of
them (``tests/upstream/stdio/test_job.py``).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, cast

from checkpoint_mcp.upstream.stdio.tree import PopenTree, popen_shell

assert sys.platform == "win32", "Job Objects are Windows' (process.spawn chooses)"

import pywintypes  # noqa: E402 - Windows only: after the assertion that says so
import win32api  # noqa: E402
import win32con  # noqa: E402
import win32job  # noqa: E402

logger = logging.getLogger(__name__)

CREATION_FLAGS = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.CREATE_NO_WINDOW
"""A group of its own (a console's Ctrl+C is not the upstream's), and no console window of its own."""


class JobTree(PopenTree):
    """A local upstream in a Job Object of its own (``tree.LocalProcess``)."""

    def __init__(self, popen: subprocess.Popen[bytes], job: Any | None) -> None:
        super().__init__(popen)
        self._job = job  # None: the job could not be made; the process alone is ended

    @property
    def watched_pid(self) -> int | None:
        """None: Windows has no pidfd; a thread waits."""
        return None

    def terminate(self) -> None:
        """End the job: Windows has no group-wide SIGTERM (the stdin close was the server's chance)."""
        self.kill_tree()

    def kill_tree(self) -> None:
        """Terminate every member of the job, now (and the first process, if it is in none)."""
        if self._job is not None:
            with contextlib.suppress(pywintypes.error):
                win32job.TerminateJobObject(self._job, 1)
        with contextlib.suppress(OSError):
            self._popen.kill()

    def tree_alive(self) -> bool:
        """Whether the job still has a process running."""
        if self._job is None:
            return self._popen.poll() is None
        try:
            info = win32job.QueryInformationJobObject(self._job, win32job.JobObjectBasicAccountingInformation)
        except pywintypes.error:
            return self._popen.poll() is None
        return int(info["ActiveProcesses"]) > 0

    def close(self) -> None:
        """Close our handle on the job (which kills whatever is left in it)."""
        job, self._job = self._job, None
        if job is not None:
            with contextlib.suppress(pywintypes.error):
                win32api.CloseHandle(job)


def spawn(
    command: str, environ: Mapping[str, str] | None = None, *, cwd: str | None = None, quiet: bool = False
) -> JobTree:
    """Start ``command`` with ``cmd.exe`` in a Job Object of its own, with pipes for its stdin and stdout
    (``environ``: its whole environment, None: ours; ``cwd``: its folder; ``quiet``: its stderr goes nowhere).

    Raises:
        OSError: the shell could not be started.
    """
    popen = popen_shell(command, environ, cwd=cwd, quiet=quiet, creationflags=CREATION_FLAGS)
    return JobTree(popen, _job_for(popen.pid))


def _job_for(pid: int) -> Any | None:
    """A new Job Object that kills its members when closed, with process ``pid`` in it; None if that failed (the
    upstream then runs unguarded, and a warning says so)."""
    job: Any | None = None
    try:
        job = cast(Any, win32job.CreateJobObject(None, ""))
        limits = win32job.QueryInformationJobObject(job, win32job.JobObjectExtendedLimitInformation)
        limits["BasicLimitInformation"]["LimitFlags"] |= win32job.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        win32job.SetInformationJobObject(job, win32job.JobObjectExtendedLimitInformation, limits)
        process = win32api.OpenProcess(win32con.PROCESS_SET_QUOTA | win32con.PROCESS_TERMINATE, False, pid)
        try:
            win32job.AssignProcessToJobObject(job, process)
        finally:
            win32api.CloseHandle(process)
    except pywintypes.error as exc:
        logger.warning("the upstream (pid %d) is in no Job Object: it may outlive a crash of the proxy (%s)", pid, exc)
        if job is not None:
            with contextlib.suppress(pywintypes.error):
                win32api.CloseHandle(job)
        return None
    return job
