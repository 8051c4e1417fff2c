"""The user: the name an operator's action is recorded under, and the folders each platform documents (an XDG
variable, where set, wins everywhere).

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

import getpass
import os
from collections.abc import Mapping
from typing import Final

from checkpoint_mcp.platforms.host import HOST

APP: Final = "checkpoint"


def user_name() -> str:
    """Who this process runs as, for the records an operator's action leaves (a resolution, an approval): the login
    name, else ``uid N`` for a user the system has no name for (a container's arbitrary uid, as OpenShift assigns
    one, has no passwd entry and no ``USER``)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # KeyError before Python 3.13, OSError since
        getuid = getattr(os, "getuid", None)
        return f"uid {getuid()}" if getuid is not None else "unknown user"


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
