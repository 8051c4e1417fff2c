"""Which directory is the project, and how a file path given by the agent is stored relative to it.

The root comes from the first of: the ``projectRoot`` argument, ``CHECKPOINT_PROJECT_ROOT``,
``CLAUDE_PROJECT_DIR`` (set by Claude Code for the servers and hooks it starts), the client's first
``file://`` root, and the server's working directory. It must be an absolute path to an existing directory;
symlinks are resolved so that one project has one checkpoint however it is reached.
"""

from __future__ import annotations

import enum
import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from checkpoint_mcp.errors import PathOutsideProject, ProjectRootError
from checkpoint_mcp.session.model import PATH_MAX

CHECKPOINT_ENV: Final = "CHECKPOINT_PROJECT_ROOT"
CLAUDE_ENV: Final = "CLAUDE_PROJECT_DIR"


class RootSource(enum.Enum):
    """Where the project root came from, in resolution order."""

    ARGUMENT = "projectRoot"  # the tool argument, or `checkpoint brief --project-root`
    CHECKPOINT_ENV = CHECKPOINT_ENV  # set by whoever configured the server
    CLAUDE_ENV = CLAUDE_ENV  # set by Claude Code for the MCP servers and hooks it starts
    CLIENT_ROOT = "client root"  # the first file:// root the MCP client reported
    WORKING_DIRECTORY = "working directory"  # the last resort: often `/` or a package cache


@dataclass(frozen=True)
class ProjectRoot:
    """An absolute, symlink-free path to an existing directory, and where it came from."""

    path: str
    source: RootSource

    @property
    def name(self) -> str:
        """The project's name: the root directory's own name."""
        return os.path.basename(self.path) or self.path


def resolve_root(
    argument: str | None,
    *,
    environ: Mapping[str, str],
    client_roots: Iterable[str] = (),
    cwd: str,
    argument_label: str = "projectRoot",
) -> ProjectRoot:
    """Pick the project root in resolution order and validate it.

    Raises:
        ProjectRootError: the chosen path is relative, missing, or not a directory.
    """
    if argument is not None and not argument:
        raise ProjectRootError(f"{argument_label} is empty: give the project's absolute path, or leave it out")
    candidates: list[tuple[str | None, RootSource, str]] = [
        (argument, RootSource.ARGUMENT, argument_label),
        (environ.get(CHECKPOINT_ENV), RootSource.CHECKPOINT_ENV, CHECKPOINT_ENV),
        (environ.get(CLAUDE_ENV), RootSource.CLAUDE_ENV, CLAUDE_ENV),
        (first_file_root(client_roots), RootSource.CLIENT_ROOT, "the client's root"),
    ]
    for value, source, label in candidates:
        if value:
            return ProjectRoot(_validated(value, label), source)
    return ProjectRoot(_validated(cwd, "the working directory"), RootSource.WORKING_DIRECTORY)


def first_file_root(uris: Iterable[str]) -> str | None:
    """The local path of the first ``file://`` URI, or None when there is none."""
    for uri in uris:
        from urllib.parse import unquote, urlsplit  # MCP clients' roots only: `checkpoint brief` has none

        parts = urlsplit(uri)
        if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path:
            return unquote(parts.path)
    return None


def _validated(path: str, label: str) -> str:
    if not os.path.isabs(path):
        raise ProjectRootError(f"{label} must be an absolute path, got {path!r}")
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        raise ProjectRootError(f"{label} is not an existing directory: {path}")
    return real


def relative_path(root: str, path: str) -> str:
    """The path as stored in the checkpoint: relative to ``root``, normalized, with ``/`` separators.

    An absolute path inside the project (directly or through a symlinked directory) becomes relative. A path
    whose folder, once symlinks are resolved, lies outside the project is refused; the file itself is not
    followed (a symlink in the project that points elsewhere is a file of the project).

    Raises:
        PathOutsideProject: the path is empty, too long, or resolves outside the project root.
    """
    if not path or "\0" in path or len(path) > PATH_MAX:
        raise PathOutsideProject(f"not a usable file path: {path[:80]!r}")
    if os.path.isabs(path):
        relative = _inside(root, os.path.normpath(path))
        if relative is None:
            # The parent directory may be reached through a symlink; the file itself is not followed,
            # so a symlink inside the project pointing elsewhere still counts as inside.
            parent, base = os.path.split(os.path.normpath(path))
            relative = _inside(root, os.path.join(os.path.realpath(parent), base))
        if relative is None:
            raise PathOutsideProject(f"{path} is outside the project root {root}")
    else:
        relative = posixpath.normpath(path.replace(os.sep, "/"))
        if relative in (".", "..") or relative.startswith("../"):
            raise PathOutsideProject(f"{path} is outside the project root {root}")
    # A folder on the way may be a symlink that leads out of the project: the file's folder must resolve inside.
    folder = os.path.realpath(os.path.dirname(os.path.join(root, relative)))
    if folder != root and _inside(root, folder) is None:
        raise PathOutsideProject(f"{path} is outside the project root {root} (through a symlinked folder)")
    return relative


def _inside(root: str, path: str) -> str | None:
    relative = os.path.relpath(path, root)
    if relative in {".", ".."} or relative.startswith(".." + os.sep):
        return None
    return relative.replace(os.sep, "/")
