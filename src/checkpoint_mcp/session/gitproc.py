"""Git commands started in the background and collected later, without the ``subprocess`` module.

``checkpoint brief`` runs as a Claude Code SessionStart hook at every session start. It starts ``git status``
before it imports the rest of the session code, and imports while git works: on a 100,000-file repository the
status takes longer than all of the imports. So this module imports only what the interpreter has loaded at
start-up anyway, or nearly (``subprocess`` alone would cost ~7 ms more); the errors module is imported when there
is an error.

Starting several commands at once also lets one load or save overlap them: ``rev-parse`` with ``status``, the
blob hashes of the recorded files with both, the history commands with each other.

A command behaves as ``subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True,
encoding="utf-8", errors="surrogateescape", timeout=timeout)`` did: the same decoding (with universal newlines),
SIGPIPE and SIGXFSZ back to their defaults in the child, the child killed and reaped at the timeout. It runs as
``git -C ROOT ARGS…`` (``os.posix_spawn`` cannot change the child's directory; ``-C`` makes git do it first),
with ``GIT_OPTIONAL_LOCKS=0`` (a status never takes ``index.lock`` while the user runs git) and
``GIT_TERMINAL_PROMPT=0``.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import time

TYPE_CHECKING = False  # `typing` is not imported at run time: it costs more than this whole module
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Final

    from checkpoint_mcp.errors import GitError

TIMEOUT_SECONDS: Final = 3.0
"""Longest any single git command may take before the save or load goes on without it."""

PREFIX_ARGS: Final = ("rev-parse", "--is-inside-work-tree", "--show-prefix")
STATUS_ARGS: Final = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--", ".")

_READ_SIZE: Final = 1 << 16
_PIPE_BUF: Final = getattr(select, "PIPE_BUF", 512)


def _git_error(message: str) -> GitError:
    from checkpoint_mcp.errors import GitError

    return GitError(message)


def _above_stdio(fd: int) -> int:
    """``fd`` moved above 0-2 (it lands there only when the parent's own stdio is closed); close-on-exec."""
    if fd > 2:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def _pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()  # both close-on-exec: the child keeps only what it dup2s onto 0-2
    return _above_stdio(read_end), _above_stdio(write_end)


def info(message: str, *args: object) -> None:
    """Log at info level for ``checkpoint_mcp.session.git``; ``logging`` is imported only when there is a record."""
    import logging

    logging.getLogger("checkpoint_mcp.session.git").info(message, *args)


def _text(data: bytes) -> str:
    # What subprocess's text mode returned: decoded, then universal newlines.
    return data.decode("utf-8", "surrogateescape").replace("\r\n", "\n").replace("\r", "\n")


class Started:
    """One git command, running from construction; ``wait`` collects it (once; later calls repeat the outcome).

    Construction never raises: a git that cannot be started is reported by ``wait``, where the caller expects
    git's errors.
    """

    def __init__(
        self, root: str, args: Sequence[str], *, stdin: str | None = None, timeout: float = TIMEOUT_SECONDS
    ) -> None:
        self.args = tuple(args)
        self.timeout = timeout
        self._input = stdin.encode("utf-8", "surrogateescape") if stdin is not None else None
        self._pid: int | None = None
        self._fds: dict[str, int] = {}
        self._outcome: tuple[int, str] | None = None
        self._error: GitError | None = None
        self._spawn_error: OSError | None = None
        self._cancelled = False
        self._deadline = time.monotonic() + timeout
        try:
            self._spawn(root)
        except OSError as exc:
            self._close_fds()
            self._spawn_error = exc

    def _spawn(self, root: str) -> None:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
        actions = []
        if self._input is not None:
            child_in, self._fds["in"] = _pipe()
            actions.append((os.POSIX_SPAWN_DUP2, child_in, 0))
        self._fds["out"], child_out = _pipe()
        self._fds["err"], child_err = _pipe()
        actions += [(os.POSIX_SPAWN_DUP2, child_out, 1), (os.POSIX_SPAWN_DUP2, child_err, 2)]
        child_ends = [fd for _, fd, _ in actions]
        try:
            self._pid = os.posix_spawnp(
                "git",
                ["git", "-C", root, *self.args],
                env,
                file_actions=actions,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        finally:
            for fd in child_ends:
                os.close(fd)

    # ---- collecting ----------------------------------------------------------------------------------------

    def wait(self) -> tuple[int, str]:
        """The exit status and stdout (stderr when the status is not 0), as the session code reads git.

        Raises:
            GitError: git is missing or cannot be run, or did not finish within the timeout.
        """
        if self._outcome is None and self._error is None:
            if self._cancelled:
                raise _git_error(f"`git {self.args[0]}` was cancelled")
            try:
                self._outcome = self._collect()
            except _Failure as failure:
                self._error = _git_error(str(failure))
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        return self._outcome

    def checked(self) -> str:
        """Stdout of a command that must succeed.

        Raises:
            GitError: the command failed, or ``wait`` raised.
        """
        code, output = self.wait()
        if code != 0:
            raise _git_error(f"`git {' '.join(self.args[:2])}` failed: {output.strip()[:300]}")
        return output

    def cancel(self) -> None:
        """Kill and reap the command if it is still running; a no-op once collected."""
        self._kill()
        self._cancelled = True

    def _collect(self) -> tuple[int, str]:
        if self._spawn_error is not None:
            if isinstance(self._spawn_error, FileNotFoundError):
                raise _Failure("git is not installed or not on PATH")
            raise _Failure(f"cannot run git: {self._spawn_error}")
        try:
            out, err = self._communicate()
            code = self._reap()
        finally:
            self._kill()
        return code, _text(out) if code == 0 else _text(err)

    def _kill(self) -> None:
        if self._pid is not None:
            # Not contextlib.suppress: contextlib is not imported yet when `checkpoint brief` starts git.
            try:  # noqa: SIM105
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None
        self._close_fds()

    def _communicate(self) -> tuple[bytes, bytes]:
        """Write stdin and read stdout and stderr at the same time, as ``Popen.communicate`` does."""
        poller = select.poll()
        chunks: dict[int, list[bytes]] = {self._fds["out"]: [], self._fds["err"]: []}
        for fd in chunks:
            poller.register(fd, select.POLLIN | select.POLLPRI)
        view = memoryview(self._input or b"")
        if "in" in self._fds:
            if view:
                poller.register(self._fds["in"], select.POLLOUT)
            else:
                self._close("in")
        open_fds = len(chunks) + (1 if "in" in self._fds else 0)
        while open_fds:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise _Failure(self._timeout_message())
            for fd, event in poller.poll(remaining * 1000):
                if fd == self._fds.get("in"):
                    try:
                        written = os.write(fd, view[:_PIPE_BUF])
                    except BrokenPipeError:
                        written = len(view)
                    view = view[written:]
                    if not view:
                        poller.unregister(fd)
                        self._close("in")
                        open_fds -= 1
                    continue
                data = os.read(fd, _READ_SIZE) if event & (select.POLLIN | select.POLLPRI | select.POLLHUP) else b""
                if data:
                    chunks[fd].append(data)
                    continue
                poller.unregister(fd)
                open_fds -= 1
        return b"".join(chunks[self._fds["out"]]), b"".join(chunks[self._fds["err"]])

    def _reap(self) -> int:
        assert self._pid is not None
        pause = 0.0002
        while True:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
            if pid:
                self._pid = None
                self._close_fds()
                return os.waitstatus_to_exitcode(status)
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise _Failure(self._timeout_message())
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.05)

    def _timeout_message(self) -> str:
        return f"`git {self.args[0]}` did not finish within {self.timeout:g} seconds"

    def _close(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)

    def _close_fds(self) -> None:
        for name in list(self._fds):
            self._close(name)


class _Failure(Exception):
    """Why a command could not be collected; becomes a ``GitError`` (imported only then)."""


def parse_prefix(code: int, output: str) -> str | None:
    """The root's path inside its repository (``""`` at the top) from ``rev-parse``, or None outside a work tree."""
    lines = output.split("\n")
    if code != 0 or lines[0] != "true":
        return None
    return lines[1] if len(lines) > 1 else ""


class Hashing:
    """Git blob hashes of the regular files among ``paths`` (``git.hash_files``), started now: one ``git
    hash-object --stdin-paths`` call, collected by ``result``."""

    def __init__(self, root: str, paths: Iterable[str], timeout: float = TIMEOUT_SECONDS) -> None:
        self.requested = list(paths)
        self._root = root
        self._wanted = [p for p in dict.fromkeys(self.requested) if os.path.isfile(os.path.join(root, p))]
        self._batch = [p for p in self._wanted if "\n" not in p]
        stdin = "".join(p + "\n" for p in self._batch)
        args = ("hash-object", "--stdin-paths")
        self._run = Started(root, args, stdin=stdin, timeout=timeout) if self._batch else None

    def result(self) -> dict[str, str]:
        """Path -> blob hash; missing files, folders and broken links get none.

        Raises:
            GitError: git is missing, or timed out.
        """
        hashes: dict[str, str] = {}
        if self._run is not None:
            code, output = self._run.wait()
            digests = output.split()
            if code == 0 and len(digests) == len(self._batch):
                hashes.update(zip(self._batch, digests, strict=True))
            else:
                # A file vanished between the check and the hash: hash the survivors one by one in-process.
                info("git hash-object failed (%s); hashing in-process", output.strip()[:200])
        for path in self._wanted:
            if path not in hashes:
                digest = blob_hash(os.path.join(self._root, path))
                if digest is not None:
                    hashes[path] = digest
        return hashes

    def cancel(self) -> None:
        """Kill the command if it is still running."""
        if self._run is not None:
            self._run.cancel()


def blob_hash(path: str) -> str | None:
    """The blob hash of the raw bytes, without gitattributes filters: a fallback for odd names and races."""
    import hashlib  # the fallback only: hashlib loads OpenSSL, a few ms that a load does not need

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


class SnapshotRun:
    """``rev-parse`` (is this a work tree, and where in it) and ``status`` of ``root``, started together; and,
    optionally, the blob hashes of the files a checkpoint lists (``start_hashing``)."""

    def __init__(self, root: str, timeout: float = TIMEOUT_SECONDS) -> None:
        self.root = root
        self.timeout = timeout
        self.prefix_run = Started(root, PREFIX_ARGS, timeout=timeout)
        self.status_run = Started(root, STATUS_ARGS, timeout=timeout)
        self._hashing: Hashing | None = None

    def start_hashing(self, paths: Iterable[str]) -> None:
        """Start hashing ``paths`` now, for a drift that will list exactly these (see ``take_hashing``)."""
        self._hashing = Hashing(self.root, paths, self.timeout)

    def take_hashing(self, paths: Sequence[str]) -> Hashing | None:
        """The hashing started for exactly ``paths``, in that order; else None (and a mismatched one is cancelled)."""
        hashing, self._hashing = self._hashing, None
        if hashing is not None and hashing.requested != list(paths):
            hashing.cancel()
            return None
        return hashing

    def prefix(self) -> str | None:
        """The root's path inside its repository, or None when it is not in a work tree.

        Raises:
            GitError: git is missing, or timed out.
        """
        return parse_prefix(*self.prefix_run.wait())

    def in_work_tree(self) -> bool:
        """True when the root is inside a git work tree; False outside one, or when git cannot be run."""
        from checkpoint_mcp.errors import GitError

        try:
            return self.prefix() is not None
        except GitError:
            return False

    def cancel(self) -> None:
        """Kill whatever is still running; what was collected stays available."""
        self.prefix_run.cancel()
        self.status_run.cancel()
        if self._hashing is not None:
            self._hashing.cancel()
