"""Command lines: the shell that runs ``--upstream-cmd``, and how an argv is written as one command string.

The spec says the upstream command is run by a shell: ``/bin/sh -c CMD`` on POSIX; on Windows ``cmd.exe /d /s /c
"CMD"``, as ``subprocess`` runs ``shell=True`` (``%COMSPEC%``), so a client's ``cmd /c npx …`` entry and the
``.cmd`` shims npm installs (``npx.cmd``) run as they do for the client. An argv is kept a list for as long as it
can be; where it must become one string for that shell, ``join`` quotes it for POSIX shells (``shlex``) or for
``cmd.exe`` and the Windows C runtime's argument parsing (``mslex``, which ``subprocess.list2cmdline`` would
leave open to ``cmd.exe``'s ``&``, ``|``, ``^`` and ``%``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Final

from checkpoint_mcp.platforms.host import HOST

POSIX_SHELL: Final = "/bin/sh"


def shell_name(windows: bool = HOST.windows_commands) -> str:
    """The shell that runs ``--upstream-cmd``, as messages name it."""
    return "cmd.exe" if windows else POSIX_SHELL


def shell_args(command: str, windows: bool = HOST.windows_commands) -> str | list[str]:
    """What ``subprocess.Popen`` is given to run ``command`` with the platform's shell (a string on Windows, where
    a command line is one string and ``cmd.exe`` parses it itself).
    """
    if windows:
        comspec = os.environ.get("COMSPEC") or "cmd.exe"
        return f'"{comspec}" /d /s /c "{command}"'
    return [POSIX_SHELL, "-c", command]


def join(argv: Sequence[str], windows: bool = HOST.windows_commands) -> str:
    """``argv`` as one command line that the platform's shell turns back into exactly ``argv``."""
    if windows:
        import mslex

        return str(mslex.join(list(argv)))
    return shlex.join(argv)


def quote(word: str, windows: bool = HOST.windows_commands) -> str:
    """One word of a command line, quoted for the platform's shell."""
    if windows:
        import mslex

        return str(mslex.quote(word))
    return shlex.quote(word)
