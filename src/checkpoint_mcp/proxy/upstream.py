"""The upstream: the interface every way out implements, and the child process of a local server.

``Upstream`` is what a pump (the stdio relay, a gateway) needs of a server, however it is reached; ``UpstreamSink``
is what the server's side calls back. The stdio child (``child.ChildUpstream``) is one implementation.

A local upstream is started early, watched, and never left behind.

The proxy starts the upstream before it imports its event loop and interceptor, so the server's own start-up
(often hundreds of milliseconds for `npx`/`uvx` servers) overlaps with ours. This module therefore imports only
the standard library's process tools. The child runs ``/bin/sh -c CMD`` in a new process group with the full
environment, its stderr shared with ours, and (Linux) ``PR_SET_PDEATHSIG`` so the kernel kills it if the proxy
dies without a chance to clean up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any, Protocol

PR_SET_PDEATHSIG = 1


class UpstreamSink(Protocol):
    """What an upstream reports to the pump that drives it (all called on the event loop)."""

    def upstream_lines(self, lines: list[bytes]) -> None:
        """Complete messages from the server, one line each ending in ``\\n``, as the original bytes."""

    def upstream_closed(self) -> None:
        """The server is gone for good (its output closed); ``Upstream.died`` says how."""

    def pause_client(self, paused: bool) -> None:
        """Backpressure: the server is not taking our writes; stop (or resume) reading the client."""

    def request_abandoned(self, ident: Any, reason: str) -> None:
        """The request with JSON-RPC id ``ident`` will get no answer (its exchange broke); ``reason`` says why.

        A journaled call then stays PENDING: in doubt, never re-sent.
        """


class Upstream(Protocol):
    """A server the proxy talks to: lines in, lines out, and a bounded end."""

    async def start(self, sink: UpstreamSink) -> None:
        """Begin delivering the server's messages to ``sink``."""

    def send(self, data: bytes) -> None:
        """Send one or more complete lines (original bytes, each ending in ``\\n``) to the server."""

    def pause_reading(self, paused: bool) -> None:
        """Backpressure: the client is not reading; stop (or resume) reading the server."""

    async def died(self) -> str:
        """After ``upstream_closed``: how the server ended (``exit code 3``, ``killed by SIGKILL``)."""

    async def shutdown(self) -> str:
        """End the server gracefully, then by force, every wait bounded; how it ended."""

    def kill(self) -> None:
        """End the server at once."""


def _death_signal_setter() -> Callable[[], None] | None:
    """A pre-exec hook that asks the kernel to SIGKILL the child when we die; libc is loaded here, in the parent."""
    if sys.platform != "linux":
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return set_death_signal


def spawn(command: str) -> subprocess.Popen[bytes]:
    """Start ``/bin/sh -c command`` with pipes for stdin and stdout, in its own process group.

    Raises:
        OSError: /bin/sh could not be started.
    """
    return subprocess.Popen(  # noqa: S602 - the spec says the upstream command is run by a shell
        command,
        shell=True,
        executable="/bin/sh",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        start_new_session=True,
        preexec_fn=_death_signal_setter(),  # noqa: PLW1509 - no threads exist yet at this point
        bufsize=0,
    )


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
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
