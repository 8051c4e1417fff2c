"""``checkpoint brief`` without click: the SessionStart hook's command starts git first, then imports.

Claude Code runs ``checkpoint brief --hook`` at every session start, so its whole-process time is what users
wait for. The console script (``checkpoint_mcp.launch``) sends ``checkpoint brief …`` here before it imports
click (~20 ms), and this module starts ``git rev-parse`` and ``git status`` for the project before it imports
the session code (~30 ms), which it then imports while git works.

Only the plain forms are handled here: ``--project-root DIR``, ``--format brief|full`` and ``--hook``, in any
order, each at most once, values also as ``--option=value``. Anything else (``--help``, a bad or missing value,
an unknown option, shell completion) returns None, and the click command runs instead, exactly as before. What
is printed, and how errors end, is what the click command does: the same text through the same stream (click
itself prints when it would change the text: escape sequences it strips, an ASCII stdout it re-encodes),
``Error: …`` from click itself and status 1 for a ``CheckpointError``, ``Aborted!`` on Ctrl-C, status 1 on a
closed pipe.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
import sys

TYPE_CHECKING = False  # `typing` is not imported at run time (see gitproc)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from checkpoint_mcp.session.gitproc import SnapshotRun

# The same names as root.CHECKPOINT_ENV, root.CLAUDE_ENV, store.CHECKPOINT_NAME and store.BACKUP_NAME (a test
# checks), written out so that the guess below needs no import. A wrong guess costs time, never correctness:
# the load uses the prefetched git commands only for the root it resolved itself.
_ROOT_VARIABLES = ("CHECKPOINT_PROJECT_ROOT", "CLAUDE_PROJECT_DIR")
_CHECKPOINT_FILES = (".claude-checkpoint", ".claude-checkpoint.prev")
_FORMATS = ("brief", "full")


class _Options:
    def __init__(self) -> None:
        self.project_root: str | None = None
        self.output = "brief"
        self.hook = False


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> _Options | None:
    """The options of ``checkpoint brief ARGV``, or None when click must handle the command line."""
    if any(name.startswith("_") and name.endswith("_COMPLETE") for name in environ):
        return None  # shell completion is click's
    options = _Options()
    seen: set[str] = set()
    tokens = list(argv)
    while tokens:
        name, equals, value = tokens.pop(0).partition("=")
        if name in seen:
            return None
        seen.add(name)
        if name == "--hook" and not equals:
            options.hook = True
            continue
        if name not in ("--project-root", "--format") or not (equals or tokens):
            return None
        if not _set(options, name, value if equals else tokens.pop(0)):
            return None
    return options


def _set(options: _Options, name: str, value: str) -> bool:
    """Store ``--format`` or ``--project-root``; False for a value click would refuse or might read otherwise."""
    if name == "--format":
        options.output = value
        return value in _FORMATS
    options.project_root = _directory(value)
    return options.project_root is not None


def _directory(value: str) -> str | None:
    """``--project-root`` as ``click.Path(file_okay=False, resolve_path=True)`` converts it, or None when click
    would refuse it (a file, an unreadable path) or the value looks like an option."""
    if not value or value.startswith("-"):
        return None
    resolved = os.path.realpath(value)
    try:
        mode = os.stat(resolved).st_mode
    except OSError:
        return resolved  # click does not require it to exist; resolving the root will refuse it
    if stat.S_ISREG(mode) or not os.access(resolved, os.R_OK):
        return None
    return resolved


def _prefetch(project_root: str | None, environ: Mapping[str, str]) -> SnapshotRun | None:
    """Start ``rev-parse`` and ``status`` for the root ``resolve_root`` will most likely pick, if it holds a
    checkpoint, then the blob hashes of the files the checkpoint lists; None when there is nothing to start."""
    try:
        guess = project_root or next((environ[v] for v in _ROOT_VARIABLES if environ.get(v)), None) or os.getcwd()
    except OSError:
        return None
    if not os.path.isabs(guess):
        return None
    root = os.path.realpath(guess)
    if not any(os.path.exists(os.path.join(root, name)) for name in _CHECKPOINT_FILES):
        return None
    from checkpoint_mcp.session.gitproc import SnapshotRun

    run = SnapshotRun(root)
    listed = _listed_files(os.path.join(root, _CHECKPOINT_FILES[0]))
    if listed is not None:
        run.start_hashing(listed)
    return run


def _listed_files(path: str) -> list[str] | None:
    """The paths in the checkpoint's ``modifiedFiles``, read without validation; None when that fails.

    Only a guess to start hashing early: the drift uses these hashes only when the validated checkpoint lists
    exactly these paths in this order.
    """
    import json

    try:
        with open(path, "rb") as handle:
            document = json.loads(handle.read())
        listed = [entry["path"] for entry in document["modifiedFiles"]]
    except (OSError, ValueError, LookupError, TypeError):
        return None
    return listed if all(isinstance(p, str) for p in listed) else None


def run(argv: Sequence[str]) -> int | None:
    """Run ``checkpoint brief ARGV`` and return the exit status, or None (nothing done) for click to run it."""
    options = parse(argv, os.environ)
    if options is None:
        return None
    prefetch = _prefetch(options.project_root, os.environ)
    try:
        from checkpoint_mcp.errors import CheckpointError
        from checkpoint_mcp.session.service import brief_text

        try:
            text = brief_text(
                options.project_root,
                output="full" if options.output == "full" else "brief",
                hook=options.hook,
                environ=os.environ,
                cwd=os.getcwd(),
                prefetch=prefetch,
            )
        except CheckpointError as exc:
            import click

            failure = click.ClickException(str(exc))
            failure.show()
            return failure.exit_code
        _echo(text)
    except (EOFError, KeyboardInterrupt):
        import click

        click.echo(file=sys.stderr)
        click.echo("Aborted!", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.stdout = _Pacified(sys.stdout)
        sys.stderr = _Pacified(sys.stderr)
        return 1
    finally:
        if prefetch is not None:
            prefetch.cancel()
    return 0


def _echo(text: str) -> None:
    """``click.echo(text)``: written here when click would write it unchanged, else by click."""
    stream = sys.stdout
    if type(stream) is not io.TextIOWrapper or "\x1b" in text or _is_ascii(stream.encoding):
        import click

        click.echo(text)
        return
    stream.write(text + "\n")
    stream.flush()


def _is_ascii(encoding: str | None) -> bool:
    try:
        return codecs.lookup(encoding or "ascii").name == "ascii"
    except LookupError:
        return False


class _Pacified:
    """A standard stream whose ``flush`` ignores a closed pipe, as click leaves them after EPIPE."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
