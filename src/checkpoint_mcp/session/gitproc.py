"""Git commands started in the background and collected later.

Starting several commands at once lets one load or save overlap them: ``rev-parse`` with ``status``, the blob
hashes of the recorded files with both, the history commands with each other. Each is a ``subprocess.Popen``
of ``git -C ROOT ARGS…`` (an argv list, never a shell) with ``GIT_OPTIONAL_LOCKS=0`` (a status never takes
``index.lock`` while the user runs git) and ``GIT_TERMINAL_PROMPT=0``, collected with a timeout after which it is
killed and reaped. Output is decoded as UTF-8 with ``surrogateescape`` and no newline translation: file names
may hold carriage returns.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterable, Sequence
from typing import Final

from checkpoint_mcp.errors import GitError

TIMEOUT_SECONDS: Final = 3.0
"""Longest any single git command may take before the save or load goes on without it."""

PREFIX_ARGS: Final = ("rev-parse", "--is-inside-work-tree", "--show-prefix")
STATUS_ARGS: Final = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--", ".")

_ENVIRONMENT_OVERRIDES: Final = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}

logger = logging.getLogger("checkpoint_mcp.session.git")


def info(message: str, *args: object) -> None:
    """Log at info level for ``checkpoint_mcp.session.git``."""
    logger.info(message, *args)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


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
        self._outcome: tuple[int, str] | None = None
        self._error: GitError | None = None
        self._cancelled = False
        self._process: subprocess.Popen[bytes] | None = None
        self._spawn_error: OSError | None = None
        try:
            self._process = subprocess.Popen(
                ["git", "-C", root, *self.args],
                stdin=subprocess.PIPE if self._input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **_ENVIRONMENT_OVERRIDES},
            )
        except OSError as exc:
            self._spawn_error = exc

    def wait(self) -> tuple[int, str]:
        """The exit status and stdout (stderr when the status is not 0), as the session code reads git.

        Raises:
            GitError: git is missing or cannot be run, or did not finish within the timeout.
        """
        if self._outcome is None and self._error is None:
            if self._cancelled:
                raise GitError(f"`git {self.args[0]}` was cancelled")
            try:
                self._outcome = self._collect()
            except _Failure as failure:
                self._error = GitError(str(failure))
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
            raise GitError(f"`git {' '.join(self.args[:2])}` failed: {output.strip()[:300]}")
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
        process = self._process
        assert process is not None
        try:
            out, err = process.communicate(self._input, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise _Failure(f"`git {self.args[0]}` did not finish within {self.timeout:g} seconds") from None
        self._process = None
        code = process.returncode
        return code, _text(out) if code == 0 else _text(err)

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.communicate()  # reaps it and closes its pipes


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
