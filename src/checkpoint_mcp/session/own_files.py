"""The files Checkpoint wrote in a project, which are never the agent's work: not in "Files touched", not drift.

Two kinds, found without importing ``init`` (which imports the session package):

* everything under ``.checkpoint/``, always: the folder is Checkpoint's own (the journal, the starter policy,
  its ``.gitignore``, the originals ``checkpoint init`` kept);
* a client file ``checkpoint init`` rewrote (``.mcp.json``, ``.claude/settings.json``, a ``.gitignore``) only
  while its bytes are still exactly what a run wrote: each run's manifest
  (``.checkpoint/init/<run>/manifest.json``, see ``init/files.py``) records the SHA-256 of what it wrote. A file
  edited since is the user's (or the agent's) work again and is listed as usual.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from typing import Final

STATE_FOLDER: Final = ".checkpoint"
"""``checkpoint init``'s folder in the project (``init.plan.STATE_FOLDER``)."""
_RUNS: Final = os.path.join(STATE_FOLDER, "init")
_MANIFEST: Final = "manifest.json"


def in_state_folder(relative: str) -> bool:
    """True for a path (relative to the project root, ``/``-separated as git prints it) under ``.checkpoint/``."""
    return relative == STATE_FOLDER or relative.startswith(STATE_FOLDER + "/")


def written_by_init(root: str, relatives: Iterable[str]) -> set[str]:
    """Those of ``relatives`` whose bytes are still what a ``checkpoint init`` run under ``root`` wrote."""
    written = _written(root)
    if not written:
        return set()
    found = set()
    for relative in relatives:
        digests = written.get(os.path.realpath(os.path.join(root, relative)))
        if digests and _digest(os.path.join(root, relative)) in digests:
            found.add(relative)
    return found


def _written(root: str) -> dict[str, set[str]]:
    """Real path → the SHA-256 digests of every version an ``init`` run wrote there (runs recorded under root)."""
    folder = os.path.join(root, _RUNS)
    try:
        runs = os.listdir(folder)
    except OSError:
        return {}
    written: dict[str, set[str]] = {}
    for run in runs:
        try:
            with open(os.path.join(folder, run, _MANIFEST), encoding="utf-8") as handle:
                files = json.load(handle)["files"]
            for record in files:
                written.setdefault(os.path.realpath(record["path"]), set()).add(record["written"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged or half-written record: its files are simply listed as usual
    return written


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None
