"""Git facts of the work tree: branch, HEAD, each uncommitted file with its blob hash, and drift since a save.

Git always runs as an argument list (never a shell) with ``encoding="utf-8"``, ``GIT_OPTIONAL_LOCKS=0`` (so a
status never takes the index lock and never contends with the user's own git commands) and a timeout of
``GIT_TIMEOUT_SECONDS``. The work is sized for big repositories: one ``git status --porcelain=v2 -z`` call for
the whole tree, and blob hashes only for the files that end up in a checkpoint, in one ``git hash-object
--stdin-paths`` call whose result equals ``git hash-object <file>`` (gitattributes filters included).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from checkpoint_mcp.errors import GitError
from checkpoint_mcp.session.model import FileEntry, GitFacts
from checkpoint_mcp.session.store import is_checkpoint_file

GIT_TIMEOUT_SECONDS: Final = 3.0
"""Longest any single git command may take before the save or load goes on without it."""

UNTRACKED: Final = "??"

logger = logging.getLogger(__name__)


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


def _run(root: str, args: Sequence[str], *, stdin: str | None = None) -> tuple[int, str]:
    # Optional locks off: a status must never take index.lock while the user runs git. No prompts: no tty here.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        process = subprocess.run(
            ["git", *args],
            cwd=root,
            input=stdin,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=GIT_TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"`git {args[0]}` did not finish within {GIT_TIMEOUT_SECONDS:g} seconds") from exc
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from exc
    return process.returncode, process.stdout if process.returncode == 0 else process.stderr


def _checked(root: str, args: Sequence[str], *, stdin: str | None = None) -> str:
    code, output = _run(root, args, stdin=stdin)
    if code != 0:
        raise GitError(f"`git {' '.join(args[:2])}` failed: {output.strip()[:300]}")
    return output


def _prefix(root: str) -> str | None:
    """The root's path inside its repository (``""`` at the top), or None when it is not in a work tree."""
    code, output = _run(root, ["rev-parse", "--is-inside-work-tree", "--show-prefix"])
    lines = output.split("\n")
    if code != 0 or lines[0] != "true":
        return None
    return lines[1] if len(lines) > 1 else ""


def in_work_tree(root: str) -> bool:
    """True when ``root`` is inside a git work tree; False outside one, or when git cannot be run."""
    try:
        return _prefix(root) is not None
    except GitError:
        return False


def snapshot(root: str) -> Snapshot | None:
    """Branch, HEAD and each uncommitted or untracked file under ``root``; None outside a git work tree.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    prefix = _prefix(root)
    if prefix is None:
        return None
    output = _checked(root, ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--", "."])
    return _parse_status(output, prefix)


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
    if not path or is_checkpoint_file(path) or not _representable(path):
        return
    entries.append(StatusEntry(path, code))


def _representable(path: str) -> bool:
    """False for a file name that is not valid UTF-8: it cannot be written to JSON faithfully."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        logger.info("skipping a file whose name is not UTF-8: %r", path)
        return False
    return True


def hash_files(root: str, paths: Iterable[str]) -> dict[str, str]:
    """Git blob hashes of the regular files among ``paths``, equal to what ``git hash-object <path>`` prints.

    Missing files, folders and broken links get no hash.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    wanted = [p for p in dict.fromkeys(paths) if os.path.isfile(os.path.join(root, p))]
    batch = [p for p in wanted if "\n" not in p]
    hashes: dict[str, str] = {}
    if batch:
        code, output = _run(root, ["hash-object", "--stdin-paths"], stdin="".join(p + "\n" for p in batch))
        digests = output.split()
        if code == 0 and len(digests) == len(batch):
            hashes.update(zip(batch, digests, strict=True))
        else:
            # A file vanished between the check and the hash: hash the survivors one by one in-process.
            logger.info("git hash-object failed (%s); hashing in-process", output.strip()[:200])
    for path in wanted:
        if path not in hashes:
            digest = _blob_hash(os.path.join(root, path))
            if digest is not None:
                hashes[path] = digest
    return hashes


def _blob_hash(path: str) -> str | None:
    """The blob hash of the raw bytes, without gitattributes filters: a fallback for odd names and races."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_ignored(root: str, relative: str) -> bool | None:
    """Whether git ignores the path; None outside a work tree or when git cannot tell.

    Raises:
        GitError: git is missing or timed out.
    """
    # Without --no-index, a checkpoint that was committed by mistake counts as not ignored, which it is not.
    code, _ = _run(root, ["check-ignore", "-q", "--", relative])
    return {0: True, 1: False}.get(code)


def drift(root: str, saved: GitFacts, files: Sequence[FileEntry], *, complete: bool = True) -> Drift | None:
    """Compare the work tree with a checkpoint: new commits, a branch change, and whose content changed.

    ``complete`` says the checkpoint lists every file that was uncommitted at save time. When its file list
    was cut, an unrecorded uncommitted file may have been dirty already, so it is counted in ``unknown``
    instead of being flagged: a warning that fires for files nobody touched would teach the model to ignore it.
    Returns None when ``root`` is no longer a git work tree with a commit.

    Raises:
        GitError: git is missing, failed unexpectedly, or timed out.
    """
    now = snapshot(root)
    if now is None or now.head is None:
        return None
    recorded = {f.path: f.hash for f in files}
    unrecorded = {e.path: e.status for e in now.entries if e.path not in recorded}
    commits, in_commits = _history(root, saved.head, now.head)
    judged = unrecorded if complete else {}
    # Untracked files and deletions need no hash to compare; tracked edits do, against the saved commit.
    current = hash_files(root, [*recorded, *(p for p, s in judged.items() if s != "D")])
    tracked = [p for p, s in judged.items() if s != UNTRACKED]
    before = _blobs_at(root, saved.head, now.prefix, tracked) if in_commits is not None else {}
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


def _history(root: str, saved: str, head: str) -> tuple[int | None, tuple[str, ...] | None]:
    """Commits from ``saved`` to ``head`` (None when ``saved`` is not an ancestor), and the files they
    changed under the root (None when ``saved`` no longer exists at all)."""
    if saved == head:
        return 0, ()
    code, _ = _run(root, ["merge-base", "--is-ancestor", saved, head])
    if code not in (0, 1):
        return None, None
    commits = int(_checked(root, ["rev-list", "--count", f"{saved}..{head}"]).strip()) if code == 0 else None
    output = _checked(root, ["diff", "--name-only", "-z", "--no-renames", "--relative", saved, head, "--", "."])
    return commits, tuple(p for p in output.split("\0") if p and not is_checkpoint_file(p))


def _blobs_at(root: str, commit: str, prefix: str, paths: Sequence[str]) -> dict[str, str]:
    """The blob each path had in ``commit`` (paths absent there are left out)."""
    batch = [p for p in paths if "\n" not in p]
    if not batch:
        return {}
    requests = "".join(f"{commit}:{prefix}{p}\n" for p in batch)
    output = _checked(root, ["cat-file", "--batch-check=%(objectname) %(objecttype)"], stdin=requests)
    lines = output.splitlines()
    if len(lines) != len(batch):
        raise GitError(f"`git cat-file` answered {len(lines)} lines for {len(batch)} paths")
    blobs: dict[str, str] = {}
    for path, line in zip(batch, lines, strict=True):
        name, _, kind = line.partition(" ")
        if kind == "blob":
            blobs[path] = name
    return blobs
