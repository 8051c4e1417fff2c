"""SIGTERM and SIGINT (and Windows' Ctrl+Break) as the event loop's callbacks, and a process ending at once.

POSIX loops take signal handlers themselves (``loop.add_signal_handler``, woken through a file descriptor);
Windows' loops cannot, and under ``CHECKPOINT_PORTABLE=1`` Linux takes the same path: ``signal.signal`` in the
main thread, whose handler hands the signal to the loop with ``call_soon_threadsafe``. Either way the callback
runs on the loop, as any other.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from checkpoint_mcp.platforms.host import HOST

if TYPE_CHECKING:
    import asyncio

if sys.platform == "win32":
    SHUTDOWN: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGBREAK)
    """The signals that ask a command to stop (Ctrl+Break: what a console sends a process group, as uvicorn
    knows)."""
else:
    SHUTDOWN: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)
    """The signals that ask a command to stop."""


def on_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[int], None]) -> Callable[[], None]:
    """Call ``callback(signum)`` on ``loop`` for each signal of ``SHUTDOWN``; returns what puts things back.

    Call it from the main thread (the only one where Python runs signal handlers).
    """
    if HOST.loop_signals:
        for signum in SHUTDOWN:
            loop.add_signal_handler(signum, callback, signum)

        def remove() -> None:
            for signum in SHUTDOWN:
                loop.remove_signal_handler(signum)

        return remove

    def handler(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the command is ending anyway
            loop.call_soon_threadsafe(callback, signum)

    previous = {signum: signal.signal(signum, handler) for signum in SHUTDOWN}

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return restore


def exit_on_shutdown(before_exit: Callable[[], None]) -> None:
    """End this process with ``128 + signum`` on each signal of ``SHUTDOWN``, after ``before_exit`` (bounded by the
    caller): for a server whose framework would wait on a thread blocked reading stdin. Main thread only."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        try:
            before_exit()
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(128 + signum)

    for signum in SHUTDOWN:
        signal.signal(signum, handler)


def die_now() -> None:
    """End this process at once, running nothing more, as a power loss would (SIGKILL; TerminateProcess)."""
    if sys.platform == "win32":
        os.kill(os.getpid(), signal.SIGTERM)  # Windows: TerminateProcess, which no handler sees
    else:
        os.kill(os.getpid(), signal.SIGKILL)
