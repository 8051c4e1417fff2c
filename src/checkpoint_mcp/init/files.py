"""The files `checkpoint init` reads and writes: JSON in the file's own indentation, diffs, atomic writes, the
kept originals, and ``--undo``.

Every write goes temp file → fsync → rename → fsync of the folder, so a crash leaves either the old file or the
new one. Before the first file is written, a *run* is recorded under ``<project>/.checkpoint/init/<run>/``: the
original bytes of every file it will change (owner-only: a configuration may hold a literal secret), and a
manifest saying which files did not exist and what was written. ``--undo`` undoes every run, the latest first:
the files are as before the first ``init``, byte for byte (the files and folders it created removed); a file
changed by hand since a run (a server added between two runs) is kept beside as ``<file>.checkpoint-undo-<run>``
so nothing is lost.

``~/.claude.json`` (a change with ``edits``) is Claude Code's own file, rewritten while it runs: it is written
first, only if its bytes are still those `init` read (else nothing is written and `init` says to run again), and
``--undo`` puts back the original bytes when the file is as `init` left it, else only the entries `init` changed
(``claude_json.revert``), keeping what Claude Code wrote since.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from checkpoint_mcp.debug import trigger
from checkpoint_mcp.errors import ClientConfigError, InitError
from checkpoint_mcp.init.claude_json import Edit, revert
from checkpoint_mcp.platforms import files

RUNS_FOLDER: Final = os.path.join(".checkpoint", "init")
MANIFEST: Final = "manifest.json"
_INDENT: Final = re.compile(r"\n([ \t]+)\S")


@dataclass(frozen=True)
class Loaded:
    """A file as it is now: its bytes (None: it does not exist) and their JSON value (``{}`` when absent)."""

    path: str
    raw: bytes | None
    value: Any


def load_json(path: str, *, comments_refused: bool = False) -> Loaded:
    """Read and parse a JSON configuration file; a missing file reads as ``{}``. With ``comments_refused``, a file
    its client reads as JSONC and that holds a comment is refused by name: `init` rewrites the whole file, and
    would drop them.

    Raises:
        ClientConfigError: it cannot be read, is not UTF-8, holds a comment (when refused), or is not valid JSON
            (with line and column).
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return Loaded(path, None, {})
    except OSError as exc:
        raise ClientConfigError(path, f"cannot be read ({exc.strerror})") from exc
    if not raw.strip():
        return Loaded(path, raw, {})
    try:
        if comments_refused:
            line = comment_line(raw.decode("utf-8-sig"))
            if line is not None:
                raise ClientConfigError(
                    path,
                    f"holds comments (the first on line {line}): `init` rewrites the whole file and would drop them; "
                    "move them out of it (or wrap this client's servers by hand)",
                )
        value = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ClientConfigError(path, "is not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise ClientConfigError(path, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    return Loaded(path, raw, value)


def comment_line(text: str) -> int | None:
    """The line of the first ``//`` or ``/* */`` comment outside a string in JSONC ``text`` (None: it has none)."""
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "/" and text[index + 1 : index + 2] in ("/", "*"):
            return text.count("\n", 0, index) + 1
    return None


def render_json(value: Any, like: bytes | None) -> bytes:
    """``value`` as JSON text in the indentation of the file it replaces (two spaces for a new one)."""
    indent: str | int = 2
    if like:
        found = _INDENT.search(like.decode("utf-8", "replace"))
        if found:
            indent = found.group(1)
    return (json.dumps(value, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


def unified_diff(path: str, before: bytes | None, after: bytes) -> str:
    """A unified diff of one file, ``/dev/null`` for a new one."""
    old = before.decode("utf-8", "replace").splitlines(keepends=True) if before is not None else []
    new = after.decode("utf-8", "replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, "/dev/null" if before is None else path, path)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@dataclass(frozen=True)
class Change:
    """One file `init` writes: what it holds now (None: absent) and what it will hold."""

    path: str
    before: bytes | None
    after: bytes
    edits: tuple[Edit, ...] | None = None
    """The entries changed in a file its client rewrites while it runs (``~/.claude.json``): the file is written
    only if still as read, and undone entry by entry."""


def atomic_write(path: str, data: bytes, mode: int | None = None, check: Callable[[], None] | None = None) -> None:
    """Write ``data`` to ``path`` so a crash leaves the old bytes or the new ones, never a mix.

    ``mode`` defaults to the replaced file's (0644 for a new one). ``check`` runs just before the rename; what it
    raises leaves the file as it was.

    Raises:
        OSError: the folder cannot be written.
    """
    folder = os.path.dirname(path) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            files.restrict(handle.fileno(), mode)
            files.sync(handle.fileno())
        if check is not None:
            check()
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    files.sync_folder(folder)


def unchanged_since(path: str, read: bytes | None) -> Callable[[], None]:
    """A ``check`` for ``atomic_write``: ``path`` still holds the bytes ``read`` (None: it still does not exist).

    The check raises InitError, naming the file and saying to run `checkpoint init` again.
    """

    def check() -> None:
        try:
            now: bytes | None = _read(path)
        except FileNotFoundError:
            now = None
        if now != read:
            raise InitError(
                f"{path} changed while init was running (Claude Code rewrites it as it runs); it was not "
                "written: run `checkpoint init` again"
            )

    return check


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _make_folders(path: str, created: list[str]) -> None:
    """Create the missing folders above ``path``, noting each (outermost first) in ``created``."""
    missing: list[str] = []
    folder = os.path.dirname(path)
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    for each in reversed(missing):
        os.mkdir(each)
        created.append(each)


def _make_state_folders(project: str) -> None:
    """Create ``.checkpoint/`` and ``.checkpoint/init/`` owner-only (0700, whatever the umask) where missing:
    they hold the journal, which names every call's arguments, and the originals, which may hold a secret.
    Existing ones are left as they are (their owner may share them on purpose).

    Raises:
        OSError: a folder cannot be created.
    """
    for folder in (os.path.dirname(RUNS_FOLDER), RUNS_FOLDER):
        files.make_owner_only_folder(os.path.join(project, folder))


def apply(project: str, changes: Sequence[Change]) -> str:
    """Write ``changes``, having first kept the originals as a run under the project; returns the run's folder.

    Raises:
        InitError: a file or folder cannot be written (the run recorded so far can be undone).
    """
    # Names sort in the order the runs were made (``undo`` goes from the latest), two runs in one second too.
    now = time.time_ns()
    run_name = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 10**9)) + f".{now // 1000 % 10**6:06d}-{os.getpid()}"
    run = os.path.join(project, RUNS_FOLDER, run_name)
    try:
        _make_state_folders(project)
        os.mkdir(run, 0o700)
        created: list[str] = []
        for change in changes:
            _make_folders(change.path, created)
        # A file its client rewrites goes first: if it changed since it was read, nothing else is written either.
        changes = sorted(changes, key=lambda change: change.edits is None)
        records = []
        for index, change in enumerate(changes):
            record: dict[str, Any] = {"path": change.path, "written": _digest(change.after), "backup": None}
            if change.before is not None:
                record["backup"] = f"{index}.orig"
                record["mode"] = os.stat(change.path).st_mode & 0o7777
                atomic_write(os.path.join(run, record["backup"]), change.before, 0o600)
            if change.edits is not None:
                record["edits"] = [edit.record() for edit in change.edits]
            records.append(record)
        manifest = {"version": 1, "files": records, "created_folders": created}
        atomic_write(os.path.join(run, MANIFEST), json.dumps(manifest, indent=2).encode(), 0o600)
        trigger("init.run_recorded")
        for written, change in enumerate(changes):
            check = None if change.edits is None else unchanged_since(change.path, change.before)
            try:
                atomic_write(change.path, change.after, check=check)
            except InitError:
                if written == 0:  # nothing was written: forget the run, so no --undo is owed
                    _forget(run, created)
                raise
            trigger("init.file_written")
    except OSError as exc:
        raise InitError(
            f"writing {exc.filename or project} failed ({exc.strerror}); undo what was written with "
            "`checkpoint init --undo`"
        ) from exc
    return run


def _forget(run: str, created: Sequence[str]) -> None:
    """Remove a run that wrote nothing, and the folders made for it."""
    for name in os.listdir(run):
        os.unlink(os.path.join(run, name))
    os.rmdir(run)
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def recorded_runs(project: str) -> list[str]:
    """The folders of the runs `init` recorded under ``project``, oldest first."""
    folder = os.path.join(project, RUNS_FOLDER)
    try:
        runs = sorted(name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name, MANIFEST)))
    except FileNotFoundError:
        return []
    return [os.path.join(folder, run) for run in runs]


@dataclass(frozen=True)
class Restored:
    """What ``undo`` did to one file; ``kept`` is where a version changed by hand since was put aside."""

    path: str
    action: str  # "restored" or "removed"
    kept: str | None = None


def undo(project: str) -> list[Restored]:
    """Undo every recorded run, the latest first, so that the files are as they were before the first `init`:
    each run's originals put back byte for byte, the files it created removed, the run forgotten.

    A file changed between two runs (a server added by hand, then wrapped by a second `init`) is such an edit:
    undoing the first run keeps that version beside the restored original.

    Raises:
        InitError: there is nothing to undo, a run's record is damaged, or a file cannot be written.
    """
    runs = recorded_runs(project)
    if not runs:
        raise InitError(f"nothing to undo: `checkpoint init` recorded no change under {project}")
    done: list[Restored] = []
    for run in reversed(runs):
        for restored in _undo_run(run):
            # One line per file: what the oldest run did to it, and every version kept aside on the way.
            done = [d for d in done if d.path != restored.path or d.kept] + [restored]
    return done


def _undo_run(run: str) -> list[Restored]:
    """Put back the files of one run byte for byte, remove the ones it created, and forget the run.

    Raises:
        InitError: the run's record is damaged, or a file cannot be written.
    """
    try:
        with open(os.path.join(run, MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        records = manifest["files"]
        originals = [None if f["backup"] is None else _read(os.path.join(run, f["backup"])) for f in records]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InitError(f"the record of {run} is damaged ({exc}); nothing was restored") from exc
    done: list[Restored] = []
    try:
        for record, original in zip(records, originals, strict=True):
            path = record["path"]
            if "edits" in record:
                done.append(_undo_edits(record, original))
                trigger("init.file_restored")
                continue
            kept = _put_aside(path, (record["written"], _digest(original or b"")), os.path.basename(run))
            if original is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    files.sync_folder(os.path.dirname(path))
                done.append(Restored(path, "removed", kept))
            else:
                atomic_write(path, original, record.get("mode"))
                done.append(Restored(path, "restored", kept))
            trigger("init.file_restored")
        for folder in reversed(manifest.get("created_folders", [])):
            with contextlib.suppress(OSError):  # not empty any more: someone put files there; keep it
                os.rmdir(folder)
        for name in os.listdir(run):
            os.unlink(os.path.join(run, name))
        os.rmdir(run)
        for folder in (os.path.dirname(run), os.path.dirname(os.path.dirname(run))):
            with contextlib.suppress(OSError):  # only when empty: the journal lives in .checkpoint too
                os.rmdir(folder)
    except OSError as exc:
        raise InitError(
            f"restoring {exc.filename or run} failed ({exc.strerror}); run `checkpoint init --undo` "
            "again once it can be written"
        ) from exc
    return done


def _undo_edits(record: dict[str, Any], original: bytes | None) -> Restored:
    """Undo one run's change to ``~/.claude.json``: the original bytes when the file is as the run left it,
    else (Claude Code wrote it since) only the entries the run changed, every other key as it is now.

    Raises:
        InitError: the record is damaged, the file is not JSON now, or it changed while being written.
        OSError: the file cannot be written.
    """
    path = record["path"]
    try:
        edits = [Edit.from_record(each) for each in record["edits"]]
    except (KeyError, TypeError) as exc:
        raise InitError(f"the record of {path} is damaged ({exc}); it was not restored") from exc
    try:
        current: bytes | None = _read(path)
    except FileNotFoundError:
        current = None
    if current is None or _digest(current) == _digest(original or b""):
        return Restored(path, "left alone (init's entries are not in it):")
    if _digest(current) == record["written"]:
        atomic_write(path, original or b"", record.get("mode"), check=unchanged_since(path, current))
        return Restored(path, "restored")
    text, skipped = revert(current, edits, path)
    atomic_write(path, text, check=unchanged_since(path, current))
    changed = ", ".join(edit.pointer[-1] for edit in skipped)
    but = f" (not {changed}: changed since)" if changed else ""
    return Restored(path, f"put back the entries init changed{but} in")


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _put_aside(path: str, known: tuple[str, str], run_name: str) -> str | None:
    """Copy a file that is neither what `init` wrote nor the original (``known``: their digests) beside it, so
    undoing never loses an edit made since (an undo cut short and run again finds originals: no copy)."""
    try:
        current = _read(path)
    except FileNotFoundError:
        return None
    if _digest(current) in known:
        return None
    aside = f"{path}.checkpoint-undo-{run_name}"
    atomic_write(aside, current, 0o600)
    return aside
