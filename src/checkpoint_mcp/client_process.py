"""Which client session a process belongs to: the process of the agent's client that it runs under.

A client session is one process of the client (one `claude` of Claude Code, one `codex`, one `gemini`, one
`opencode run`, one extension host of VS Code, …; the table per client is in docs/sessions.md). Every client `init`
supports starts its stdio servers as its own children, and runs its session-start hook or plugin under itself,
directly (Codex, Gemini CLI, Qwen Code, Copilot CLI, OpenCode), through ``/bin/sh -c`` (Claude Code) or from a
helper process of its own (Cline). So:

* a proxy's client is its parent process, past any shell that started it (``client_of_this_process``);
* a session-start hook's clients are its ancestors, up to ``ANCESTORS`` of them (``ancestors_of_this_process``);

and a start concerns a proxy when the proxy's client is among the hook's. Two terminals, or two clients side by
side, are two client processes: a start in one marks nothing of the other.

A process is named ``<pid>:<start>``: its start time (clock ticks since boot on Linux, the start date elsewhere) tells
a reused pid apart. Linux reads ``/proc``; another POSIX system asks ``ps`` once; where neither works (Windows)
nothing is known, and a start then concerns every session, as before clients were told apart.
"""

from __future__ import annotations

import os
import subprocess
from typing import Final, NamedTuple

ANCESTORS: Final = 3
"""How many of a hook's ancestors name its client session: Claude Code runs a hook through ``/bin/sh`` (the client is
the second), Cline from a plugin host of its own (the second too), the others directly (the first); one more is
margin. Not more: a client that runs inside another (Claude Code in a VS Code terminal) must not be taken for the
outer one too often (a start it records would mark the outer client's session)."""

SHELLS: Final = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "fish", "env"})
"""Processes that only pass a command on: a proxy started through one belongs to the client above it."""

PS_TIMEOUT: Final = 5.0
"""Seconds ``ps`` may take (outside Linux)."""


class Process(NamedTuple):
    """One process: its parent, its name (the executable's, as the system shows it) and its start time."""

    pid: int
    ppid: int
    name: str
    start: str

    @property
    def key(self) -> str:
        """``pid:start``: the process, told apart from a later one with its pid."""
        return f"{self.pid}:{self.start}"


def _from_proc(pid: int) -> Process | None:
    """``/proc/<pid>/stat`` read (Linux): the name is in parentheses and may hold anything, so the fields are counted
    from the last ``)``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode(errors="replace")
    except OSError:
        return None
    close = stat.rfind(")")
    fields = stat[close + 2 :].split()
    if close < 0 or len(fields) < 20:
        return None
    return Process(pid, int(fields[1]), stat[stat.find("(") + 1 : close], fields[19])


def _table_from_ps() -> dict[int, Process]:
    """Every process as ``ps`` lists it (macOS, the BSDs): pid, parent, start date, name."""
    try:
        done = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,lstart=,comm="],
            capture_output=True,
            text=True,
            timeout=PS_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    table: dict[int, Process] = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        name = os.path.basename(" ".join(parts[7:]))
        table[int(parts[0])] = Process(int(parts[0]), int(parts[1]), name, "-".join(parts[2:7]))
    return table


class _Processes:
    """Looks processes up, by ``/proc`` where there is one, else from one listing of ``ps``."""

    def __init__(self) -> None:
        self._proc = os.path.isdir("/proc/self")
        self._table: dict[int, Process] | None = None

    def get(self, pid: int) -> Process | None:
        if self._proc:
            return _from_proc(pid)
        if self._table is None:
            self._table = _table_from_ps() if os.name == "posix" else {}
        return self._table.get(pid)


def _chain(limit: int) -> list[Process]:
    """This process's ancestors, nearest first, at most ``limit`` of them (never pid 1 or 0)."""
    processes = _Processes()
    found: list[Process] = []
    me = processes.get(os.getpid())
    pid = me.ppid if me is not None else os.getppid()
    while pid > 1 and len(found) < limit:
        process = processes.get(pid)
        if process is None:
            break
        found.append(process)
        pid = process.ppid
    return found


def client_of_this_process() -> str | None:
    """The client session this process (a proxy) serves: its parent, past any shell; None where it cannot be known."""
    for process in _chain(ANCESTORS):
        if process.name not in SHELLS:
            return process.key
    return None


def ancestors_of_this_process() -> tuple[str, ...]:
    """The client sessions this process (a session-start hook) may have been run by: its ancestors, nearest first;
    none where they cannot be known."""
    return tuple(process.key for process in _chain(ANCESTORS))
