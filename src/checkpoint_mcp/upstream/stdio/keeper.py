"""The upstream's process tree, kept whole: a small keeper process takes all of it down with the proxy.

``/bin/sh -c CMD`` (dash, for one) forks the command instead of exec'ing it, and a parent-death signal
(``PR_SET_PDEATHSIG``) does not pass to the children of a fork: on its own it protects only the shell, while
the real server, a grandchild, would outlive a SIGKILLed proxy and finish the call in flight unseen. So on
Linux the proxy forks a *keeper* first (a fork of the proxy itself, before any thread exists: no interpreter
start-up), and the keeper runs the shell:

* the keeper is a child subreaper (``PR_SET_CHILD_SUBREAPER``): any process of the tree orphaned by a double
  fork or a ``setsid`` becomes its child, so the whole tree is always below it, whatever the shell makes of
  the command (pipelines, lists, subshells, background jobs);
* its parent-death signal is ``SIGUSR1``: when the proxy dies, however it dies, the kernel tells the keeper,
  which SIGKILLs every descendant, reaps them and exits. ``SIGUSR1`` from the proxy means the same (``kill``);
* it leads a new session (no terminal's signals reach the tree); the shell leads its own process group in it,
  which receives the proxy's graceful ``SIGTERM``, and has ``PR_SET_PDEATHSIG(SIGKILL)`` towards the keeper;
* it exits once no descendant is left, with the shell's exit status, so the proxy still reports how the
  upstream ended, and the keeper's exit means the whole tree is gone.

Elsewhere there are no subreapers: ``group.py`` keeps the tree there (``process.spawn`` chooses).

The proxy also asks ``writer_left`` whether anything of the tree can still write to its stdout pipe: a shell
waiting for its children holds the pipe too, so the pipe would never report EOF when the server itself closed
its stdout. Everything here runs before the event loop is imported and uses only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import IO, NoReturn

from checkpoint_mcp.platforms.commands import POSIX_SHELL
from checkpoint_mcp.upstream.stdio import procfs

assert sys.platform != "win32", "the keeper is Linux's (process.spawn chooses)"

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SHELL = POSIX_SHELL
_WATCHED = {signal.SIGCHLD, signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
_FD_LIMIT = 1 << 16  # the keeper closes every inherited descriptor below this one


class KeptTree:
    """A local upstream below a keeper (``tree.LocalProcess``): the keeper's exit means the whole tree is gone."""

    def __init__(self, *, pid: int, waited: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        """The shell: the upstream's process, and the id of its process group."""
        self.waited = waited
        """The keeper, whose exit means the tree is gone."""
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._pipe = f"pipe:[{os.fstat(stdout.fileno()).st_ino}]"

    @property
    def keeps_tree(self) -> bool:
        """Always: the keeper exits once no process of the upstream is left."""
        return True

    @property
    def watched_pid(self) -> int | None:
        """The keeper."""
        return self.waited

    def wait(self) -> int:
        """Block until the keeper exits; the shell's returncode, which it passes on."""
        if self.returncode is None:
            _, status = os.waitpid(self.waited, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def terminate(self) -> None:
        """SIGTERM to the shell's process group (the keeper leaves it to the tree)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)

    def kill_tree(self) -> None:
        """SIGKILL every process of the upstream, now (through the keeper, which then exits)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.waited, signal.SIGUSR1)

    def tree_alive(self) -> bool:
        """Until the keeper has been seen to exit."""
        return self.returncode is None

    def close(self) -> None:
        """Nothing to let go: the keeper goes with us by its parent-death signal."""

    def writer_left(self) -> bool:
        """Whether some process of the tree may still write to our end of its stdout.

        A shell blocked waiting for its children does not count: it holds the pipe only because it started them.
        Unknown (no /proc, a process we may not inspect) counts as yes.
        """
        for pid in procfs.descendants(self.waited):
            if pid == self.pid and _waiting_for_children(pid):
                continue
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except FileNotFoundError:
                continue  # it just exited
            except OSError:
                return True
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == self._pipe:
                        return True
        return False


def spawn(command: str, environ: Mapping[str, str] | None = None) -> KeptTree:
    """Start ``/bin/sh -c command`` with pipes for its stdin and stdout, below a keeper; ``environ``: its whole
    environment (None: ours).

    Raises:
        OSError: the processes could not be started.
    """
    prctl = _prctl()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    report_r, report_w = os.pipe()
    parent = os.getpid()
    keeper = os.fork()
    if keeper == 0:  # pragma: no cover - runs in the keeper, which never returns
        _keeper(command, prctl, parent, stdin_r, stdout_w, report_w, environ)
    for fd in (stdin_r, stdout_w, report_w):
        os.close(fd)
    with os.fdopen(report_r, "rb") as report:
        shell = int(report.read() or b"0")  # the keeper writes the shell's pid, then closes its end
    stdin = os.fdopen(stdin_w, "wb", buffering=0)
    stdout = os.fdopen(stdout_r, "rb", buffering=0)
    if shell <= 0:
        os.waitpid(keeper, 0)
        stdin.close()
        stdout.close()
        raise OSError(f"the keeper could not start {SHELL}")
    return KeptTree(pid=shell, waited=keeper, stdin=stdin, stdout=stdout)


def _prctl() -> Callable[[int, int], int]:
    """libc's prctl, loaded in the proxy (before the fork)."""
    import ctypes

    function: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    return function


def _waiting_for_children(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/wchan", "rb") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = b""
    if wchan and wchan != b"0":
        return wchan == b"do_wait"
    return bool(procfs.children(pid))  # no wchan here: a shell with children is taken to wait for them


# ---- the keeper (runs in the forked child) ------------------------------------------------------------------


def _keeper(
    command: str,
    prctl: Callable[[int, int], int],
    parent: int,
    stdin_r: int,
    stdout_w: int,
    report_w: int,
    environ: Mapping[str, str] | None = None,
) -> NoReturn:  # pragma: no cover - runs in the keeper
    status: int | None = None
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        os.setsid()
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)
        keep = {0, 1, 2, stdin_r, stdout_w, report_w}
        low = 3
        for fd in sorted(keep - {0, 1, 2}):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, _FD_LIMIT)  # the journal's connection, its lock, the client's duplicates
        if os.getppid() != parent:
            os._exit(1)  # the proxy died before PR_SET_PDEATHSIG was in place
        shell = os.fork()
        if shell == 0:
            _exec_shell(command, prctl, stdin_r, stdout_w, environ)
        with contextlib.suppress(OSError):
            os.setpgid(shell, shell)  # also done by the shell itself: whichever runs first
        os.write(report_w, str(shell).encode())
        for fd in (stdin_r, stdout_w, report_w):
            os.close(fd)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the client's pipes: the keeper must not hold them open
        os.close(null)
        status = _watch(shell)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(2, f"checkpoint: the upstream's keeper failed: {exc!r}\n".encode())
        _kill_all()
    _exit_like(status)


def _exec_shell(
    command: str,
    prctl: Callable[[int, int], int],
    stdin_r: int,
    stdout_w: int,
    environ: Mapping[str, str] | None = None,
) -> NoReturn:  # pragma: no cover - runs in the shell, before exec
    try:
        os.setpgid(0, 0)
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.closerange(3, _FD_LIMIT)
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_DFL)  # Python ignores them; exec would pass that on
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # if the keeper itself is killed outright
        if environ is None:
            os.execv(SHELL, [SHELL, "-c", command])  # noqa: S606 - this is the shell the spec asks for
        else:
            os.execve(SHELL, [SHELL, "-c", command], environ)  # noqa: S606
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(2, f"checkpoint: cannot run {SHELL}: {exc}\n".encode())
    os._exit(127)


def _watch(shell: int) -> int | None:  # pragma: no cover - runs in the keeper
    """Reap the tree until it is empty (the shell's wait status), or kill it all on SIGUSR1 (None)."""
    status: int | None = None
    while True:
        signo = signal.sigwait(_WATCHED)
        if signo == signal.SIGUSR1:
            _kill_all()
            return status
        if signo != signal.SIGCHLD:
            continue  # SIGTERM, SIGINT, SIGHUP: meant for the tree, which the proxy signals itself
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return status  # nothing left below us
            if pid == 0:
                break
            if pid == shell:
                status = wait_status


def _kill_all() -> None:  # pragma: no cover - runs in the keeper
    """SIGKILL every descendant until none is left (orphans of the killed come to us: we are their subreaper)."""
    me = os.getpid()
    while True:
        for pid in procfs.descendants(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _exit_like(status: int | None) -> NoReturn:  # pragma: no cover - runs in the keeper
    """End the keeper as the shell ended: the same exit code, or death by the same signal."""
    if status is not None and os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else signal.SIGKILL
    with contextlib.suppress(OSError, ValueError):
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    os._exit(128 + signum)
