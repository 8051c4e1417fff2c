"""Git facts of the work tree: branch, HEAD, each uncommitted file with its blob hash, and drift since a save.

Git always runs as an argument list (never a shell) with ``GIT_OPTIONAL_LOCKS=0`` (so a status never takes the
index lock and never contends with the user's own git commands) and a timeout of ``GIT_TIMEOUT_SECONDS``
(``gitproc`` runs it). The work is sized for big repositories: one ``git status --porcelain=v2 -z`` call for
the whole tree, and blob hashes only for the files that end up in a checkpoint, in one ``git hash-object
--stdin-paths`` call whose result equals ``git hash-object <file>`` (gitattributes filters included).

Commands that do not depend on each other run at the same time: ``rev-parse`` with ``status``; during a load,
the hashes of the checkpoint's files with both; the history commands together, and the hashes and blobs of
files the checkpoint does not list together. They are collected in the order they used to run, so the first
error reported is the one it always was.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from checkpoint_mcp.errors import GitError
from checkpoint_mcp.session import gitproc, own_files
from checkpoint_mcp.session.gitproc import Hashing, SnapshotRun, Started
from checkpoint_mcp.session.model import FileEntry, GitFacts
from checkpoint_mcp.session.store import is_checkpoint_file

GIT_TIMEOUT_SECONDS: Final = gitproc.TIMEOUT_SECONDS
"""Longest any single git command may take before the save or load goes on without it."""

UNTRACKED: Final = "??"


@dataclass(frozen=True)
class StatusEntry:
    """One uncommitted or untracked file: its path relative to the project root and its porcelain code."""

    path: str
    status: str


@dataclass(frozen=True)
class Snapshot:
    """The work tree now. ``head`` is None before the first commit; ``branch`` is None on a detached HEAD.

    ``prefix`` is the root's own path inside the repository (``""`` when the root is the repository's top).
    """

    branch: str | None
    head: str | None
    entries: tuple[StatusEntry, ...]
    prefix: str = ""

    @property
    def facts(self) -> GitFacts | None:
        """What a checkpoint records; None before the first commit, when nothing can anchor drift."""
        if self.head is None:
            return None
        return GitFacts(branch=self.branch, head=self.head, dirty=bool(self.entries))


@dataclass(frozen=True)
class Drift:
    """What changed since a checkpoint was saved.

    ``commits_since`` is None when the saved commit is no longer reachable from HEAD (rebased or reset away).
    ``changed_since`` lists only files whose content differs from what it was at save time.
    """

    saved_head: str
    saved_branch: str | None
    current_branch: str | None
    current_head: str
    commits_since: int | None
    changed_since: tuple[str, ...]
    unknown: int = 0
    """Uncommitted files the checkpoint does not list because its file list was cut: unjudgeable."""

    @property
    def branch_changed(self) -> bool:
        """True when HEAD is on another branch (or detached) compared with save time."""
        return self.saved_branch != self.current_branch


def _start(root: str, args: Sequence[str], *, stdin: str | None = None) -> Started:
    return Started(root, args, stdin=stdin, timeout=GIT_TIMEOUT_SECONDS)


def start_snapshot(root: str) -> SnapshotRun:
    """Start ``rev-parse`` and ``status`` of ``root`` now; ``snapshot(root, started=…)`` collects them."""
    return SnapshotRun(root, GIT_TIMEOUT_SECONDS)


def in_work_tree(root: str) -> bool:
    """True when ``root`` is inside a git work tree; False outside one, or when git cannot be run."""
    run = _start(root, gitproc.PREFIX_ARGS)
    try:
        return gitproc.parse_prefix(*run.wait()) is not None
    except GitError:
        return False
    finally:
        run.cancel()


def snapshot(root: str, *, started: SnapshotRun | None = None) -> Snapshot | None:
    """Branch, HEAD and each uncommitted or untracked file under ``root``; None outside a git work tree.

    ``started``: the commands already running for ``root`` (``start_snapshot``); its owner cancels it.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    run = started if started is not None else start_snapshot(root)
    try:
        prefix = run.prefix()
        if prefix is None:
            return None
        now = _parse_status(run.status_run.checked(), prefix)
    finally:
        if started is None:
            run.cancel()
    # What `checkpoint init` wrote is Checkpoint's, not the agent's work (``own_files``).
    own = own_files.written_by_init(root, (e.path for e in now.entries))
    if not own:
        return now
    return Snapshot(now.branch, now.head, tuple(e for e in now.entries if e.path not in own), now.prefix)


def _parse_status(output: str, prefix: str) -> Snapshot:
    branch: str | None = None
    head: str | None = None
    entries: list[StatusEntry] = []
    records = iter(output.split("\0"))
    for record in records:
        if record.startswith("2 "):
            # A rename or copy: the new path, then the original path as a record of its own.
            fields = record.split(" ", 9)
            next(records, None)
            _add(entries, prefix, fields[-1], _code(fields[1]))
        elif record.startswith("# branch.oid "):
            oid = record.removeprefix("# branch.oid ")
            head = None if oid == "(initial)" else oid
        elif record.startswith("# branch.head "):
            name = record.removeprefix("# branch.head ")
            branch = None if name == "(detached)" else name
        elif record[:2] in ("1 ", "u "):
            fields = record.split(" ", 8 if record[0] == "1" else 10)
            _add(entries, prefix, fields[-1], _code(fields[1]))
        elif record.startswith("? "):
            _add(entries, prefix, record[2:], UNTRACKED)
    return Snapshot(branch=branch, head=head, entries=tuple(entries), prefix=prefix)


def _code(xy: str) -> str:
    """One porcelain letter for an ``XY`` pair: deleted in the work tree wins, then the staged change."""
    index, worktree = xy[0], xy[1]
    if worktree == "D":
        return "D"
    if "U" in xy or xy in ("AA", "DD"):
        return "U"
    return index if index != "." else worktree


def _add(entries: list[StatusEntry], prefix: str, top_path: str, code: str) -> None:
    if not top_path.startswith(prefix):
        return
    path = top_path[len(prefix) :]
    if not path or is_checkpoint_file(path) or own_files.in_state_folder(path) or not _representable(path):
        return
    entries.append(StatusEntry(path, code))


def _representable(path: str) -> bool:
    """False for a file name that is not valid UTF-8: it cannot be written to JSON faithfully."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        gitproc.info("skipping a file whose name is not UTF-8: %r", path)
        return False
    return True


def hash_files(root: str, paths: Iterable[str]) -> dict[str, str]:
    """Git blob hashes of the regular files among ``paths``, equal to what ``git hash-object <path>`` prints.

    Missing files, folders and broken links get no hash.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    hashing = Hashing(root, paths, GIT_TIMEOUT_SECONDS)
    try:
        return hashing.result()
    finally:
        hashing.cancel()


def is_ignored(root: str, relative: str) -> bool | None:
    """Whether git ignores the path; None outside a work tree or when git cannot tell.

    Raises:
        GitError: git is missing or timed out.
    """
    # Without --no-index, a checkpoint that was committed by mistake counts as not ignored, which it is not.
    run = _start(root, ["check-ignore", "-q", "--", relative])
    try:
        code, _ = run.wait()
    finally:
        run.cancel()
    return {0: True, 1: False}.get(code)


def drift(
    root: str,
    saved: GitFacts,
    files: Sequence[FileEntry],
    *,
    complete: bool = True,
    started: SnapshotRun | None = None,
) -> Drift | None:
    """Compare the work tree with a checkpoint: new commits, a branch change, and whose content changed.

    ``complete`` says the checkpoint lists every file that was uncommitted at save time. When its file list
    was cut, an unrecorded uncommitted file may have been dirty already, so it is counted in ``unknown``
    instead of being flagged: a warning that fires for files nobody touched would teach the model to ignore it.
    Returns None when ``root`` is no longer a git work tree with a commit. ``started``: the snapshot commands
    already running for ``root`` (``start_snapshot``); its owner cancels it.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    recorded = {f.path: f.hash for f in files}
    run = started if started is not None else start_snapshot(root)
    # The recorded files' hashes run alongside the status (``checkpoint brief`` may have started them already).
    recorded_hashes = run.take_hashing(list(recorded)) or Hashing(root, recorded, GIT_TIMEOUT_SECONDS)
    later: list[Hashing | _History | _Blobs] = [recorded_hashes]
    try:
        now = snapshot(root, started=run)
        if now is None or now.head is None:
            return None
        unrecorded = {e.path: e.status for e in now.entries if e.path not in recorded}
        judged = unrecorded if complete else {}
        # Untracked files and deletions need no hash to compare; tracked edits do, against the saved commit.
        tracked = [p for p, s in judged.items() if s != UNTRACKED]
        history = _History(root, saved.head, now.head)
        edited_hashes = Hashing(root, [p for p in tracked if judged[p] != "D"], GIT_TIMEOUT_SECONDS)
        blobs = _Blobs(root, saved.head, now.prefix, tracked)
        later += [history, edited_hashes, blobs]
        commits, in_commits = history.result()
        current = {**recorded_hashes.result(), **edited_hashes.result()}
        before = blobs.result() if in_commits is not None else {}
    finally:
        if started is None:
            run.cancel()
        for job in later:
            job.cancel()
    changed = {path for path, saved_hash in recorded.items() if current.get(path) != saved_hash}
    for path, status in judged.items():
        if status == UNTRACKED or in_commits is None or current.get(path) != before.get(path):
            changed.add(path)
    changed.update(p for p in in_commits or () if p not in recorded and p not in unrecorded)
    return Drift(
        saved_head=saved.head,
        saved_branch=saved.branch,
        current_branch=now.branch,
        current_head=now.head,
        commits_since=commits,
        changed_since=tuple(sorted(changed)),
        unknown=0 if complete else len(unrecorded),
    )


class _History:
    """Commits from ``saved`` to ``head`` (None when ``saved`` is not an ancestor), and the files they changed
    under the root (None when ``saved`` no longer exists at all): three commands started together."""

    def __init__(self, root: str, saved: str, head: str) -> None:
        self._runs: list[Started] = []
        if saved != head:
            self._runs = [
                _start(root, ["merge-base", "--is-ancestor", saved, head]),
                _start(root, ["rev-list", "--count", f"{saved}..{head}"]),
                _start(root, ["diff", "--name-only", "-z", "--no-renames", "--relative", saved, head, "--", "."]),
            ]

    def result(self) -> tuple[int | None, tuple[str, ...] | None]:
        if not self._runs:
            return 0, ()
        ancestor, count, diff = self._runs
        code, _ = ancestor.wait()
        if code not in (0, 1):
            return None, None
        commits = int(count.checked().strip()) if code == 0 else None
        output = diff.checked()
        return commits, tuple(p for p in output.split("\0") if p and not is_checkpoint_file(p))

    def cancel(self) -> None:
        for run in self._runs:
            run.cancel()


class _Blobs:
    """The blob each path had in ``commit`` (paths absent there are left out): one ``cat-file``, started now."""

    def __init__(self, root: str, commit: str, prefix: str, paths: Sequence[str]) -> None:
        self._batch = [p for p in paths if "\n" not in p]
        requests = "".join(f"{commit}:{prefix}{p}\n" for p in self._batch)
        args = ["cat-file", "--batch-check=%(objectname) %(objecttype)"]
        self._run = _start(root, args, stdin=requests) if self._batch else None

    def result(self) -> dict[str, str]:
        if self._run is None:
            return {}
        lines = self._run.checked().splitlines()
        if len(lines) != len(self._batch):
            raise GitError(f"`git cat-file` answered {len(lines)} lines for {len(self._batch)} paths")
        blobs: dict[str, str] = {}
        for path, line in zip(self._batch, lines, strict=True):
            name, _, kind = line.partition(" ")
            if kind == "blob":
                blobs[path] = name
        return blobs

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()
