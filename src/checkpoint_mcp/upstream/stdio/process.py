"""A local upstream's process: started early, watched, and never left behind.

The proxy starts the upstream before it imports its event loop and interceptor, so the server's own start-up
(often hundreds of milliseconds for `npx`/`uvx` servers) overlaps with ours. This module therefore imports only
the standard library's process tools. The child runs ``/bin/sh -c CMD`` with the full environment and its stderr
shared with ours; on Linux it runs below a keeper process (``keeper.py``) that takes its whole process tree down
with the proxy, however the proxy dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping

from checkpoint_mcp.upstream.stdio import keeper
from checkpoint_mcp.upstream.stdio.keeper import LocalProcess


def spawn(command: str, extra_env: Mapping[str, str] | None = None) -> LocalProcess:
    """Start ``/bin/sh -c command`` with pipes for stdin and stdout, its process tree kept (see ``keeper``);
    ``extra_env`` is added to the environment it inherits.

    Raises:
        OSError: the shell could not be started.
    """
    return keeper.spawn(command, extra_env)


def spawn_quiet(command: str, env: Mapping[str, str], cwd: str) -> LocalProcess:
    """Start ``/bin/sh -c command`` in ``cwd`` with exactly ``env``, its stderr discarded and no keeper: for a
    short question its caller ends itself (`checkpoint init` asking a server for its tools).

    Raises:
        OSError: the shell could not be started (``cwd`` missing, for one).
    """
    return keeper.spawn_plain(command, env, cwd, quiet=True)


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


def signal_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to every process of group ``pgid`` (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def group_alive(pgid: int) -> bool:
    """True while some process of group ``pgid`` is still running.

    Zombies do not count: an orphaned grandchild that has exited waits for init to reap it, which may take a
    while in a container, but it can no longer do anything.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    return any(
        len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
        for _, fields in keeper.process_stats()
    )
