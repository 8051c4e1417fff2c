"""The user's folders, where each platform documents them; an XDG variable, where set, wins everywhere.

=========== =============================== ======================================== ==========================
platform    data (user-scope journals)      state (OAuth tokens, lock files)         from
=========== =============================== ======================================== ==========================
Linux, BSD  ``~/.local/share/checkpoint``   ``~/.local/state/checkpoint``            the XDG Base Directory spec
macOS       ``~/Library/Application Support/checkpoint`` (both)                      Apple's file system guide
Windows     ``%LOCALAPPDATA%\\checkpoint`` (both)                                    Microsoft's known folders
=========== =============================== ======================================== ==========================

``$XDG_DATA_HOME`` and ``$XDG_STATE_HOME`` replace the first column's parents on every platform, so a test or a
user can put everything elsewhere with one variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from checkpoint_mcp.platforms.host import HOST

APP: Final = "checkpoint"


def home(environ: Mapping[str, str]) -> str:
    """``$HOME``, else the user's home folder (``%USERPROFILE%`` on Windows)."""
    return environ.get("HOME") or os.path.expanduser("~")


def user_data(environ: Mapping[str, str], platform: str = HOST.platform) -> str:
    """Where Checkpoint keeps the user's data (the journals of user-scope servers)."""
    return _folder(environ, platform, "XDG_DATA_HOME", (".local", "share"))


def user_state(environ: Mapping[str, str], platform: str = HOST.platform) -> str:
    """Where Checkpoint keeps the user's state (OAuth tokens, lock files standing for folders)."""
    return _folder(environ, platform, "XDG_STATE_HOME", (".local", "state"))


def _folder(environ: Mapping[str, str], platform: str, variable: str, xdg_default: tuple[str, str]) -> str:
    given = environ.get(variable)
    if given:
        return os.path.join(given, APP)
    if platform == "darwin":
        return os.path.join(home(environ), "Library", "Application Support", APP)
    if platform == "win32":
        local = environ.get("LOCALAPPDATA") or os.path.join(home(environ), "AppData", "Local")
        return os.path.join(local, APP)
    return os.path.join(home(environ), *xdg_default, APP)
