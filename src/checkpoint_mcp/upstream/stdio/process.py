"""A local upstream's process: started early, watched, and never left behind.

The proxy starts the upstream before it imports its event loop and interceptor, so the server's own start-up
(often hundreds of milliseconds for `npx`/`uvx` servers) overlaps with ours. This module therefore imports only
the standard library's process tools. The child runs ``CMD`` with the platform's shell (``/bin/sh -c``, on
Windows ``cmd.exe /c``: ``platforms.commands``), with the full environment and its stderr shared with ours, its
whole process tree kept the platform's way (``platforms.host.Tree``): below a keeper on Linux (``keeper.py``), as
a process group with a watchdog on macOS and BSD (``group.py``), in a Job Object on Windows (``job.py``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping

from checkpoint_mcp.platforms.host import HOST, Tree
from checkpoint_mcp.upstream.stdio.tree import LocalProcess


def spawn(command: str, extra_env: Mapping[str, str] | None = None) -> LocalProcess:
    """Start ``command`` with the platform's shell, with pipes for stdin and stdout, its process tree kept;
    ``extra_env`` is added to the environment it inherits.

    Raises:
        OSError: the shell could not be started.
    """
    environ = {**os.environ, **extra_env} if extra_env else None
    if sys.platform == "win32":  # HOST.tree is Tree.JOB, spelled so for the type checker
        from checkpoint_mcp.upstream.stdio import job

        return job.spawn(command, environ)
    if HOST.tree is Tree.KEEPER:
        from checkpoint_mcp.upstream.stdio import keeper

        return keeper.spawn(command, environ)
    from checkpoint_mcp.upstream.stdio import group

    return group.spawn(command, environ)


def spawn_quiet(command: str, env: Mapping[str, str], cwd: str) -> LocalProcess:
    """Start ``command`` with the platform's shell in ``cwd`` with exactly ``env``, its stderr discarded, its own
    process group (or job) but no keeper or watchdog: for a short question its caller ends itself (`checkpoint
    init` asking a server for its tools).

    Raises:
        OSError: the shell could not be started (``cwd`` missing, for one).
    """
    if sys.platform == "win32":
        from checkpoint_mcp.upstream.stdio import job

        return job.spawn(command, env, cwd=cwd, quiet=True)
    from checkpoint_mcp.upstream.stdio import group

    return group.spawn(command, env, cwd=cwd, quiet=True, watchdog=False)


def describe_status(returncode: int | None) -> str:
    """A returncode as words: ``exit code 3``, ``killed by SIGKILL``."""
    if returncode is None:
        return "closed its stdout"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"
