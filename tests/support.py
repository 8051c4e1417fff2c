"""Test harness: run `checkpoint` as a real child process over real pipes, and read what it and its upstream did."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkpoint_mcp.journal.records import CallState

SERVERS = Path(__file__).parent / "servers"
DEFAULT_TIMEOUT = 20.0


def server_cmd(name: str, *args: str) -> str:
    """The shell command that starts one of the test servers with this interpreter."""
    return shlex.join([sys.executable, str(SERVERS / name), *args])


def checkpoint_argv(*args: str) -> list[str]:
    """argv that runs the `checkpoint` command of this checkout."""
    return [sys.executable, "-m", "checkpoint_mcp", *args]


def with_umask(umask: int | None, argv: list[str]) -> list[str]:
    """``argv`` run under ``umask`` by a shell that then execs it (no ``preexec_fn``: the tests run threads)."""
    if umask is None:
        return argv
    return ["/bin/sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *argv]


class ProxyProcess:
    """A `checkpoint` process with its stdin/stdout as pipes; lines read on a thread, waits bounded."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        command: list[str] | None = None,
        umask: int | None = None,
    ) -> None:
        """``command``: the program to run instead of ``python -m checkpoint_mcp`` (the installed console script);
        ``umask``: the child's umask (the caller's when None)."""
        full_env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            with_umask(umask, [*command, *args] if command is not None else checkpoint_argv(*args)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._stash: list[dict[str, Any]] = []
        self._next_id = 1000
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def recv_line(self, timeout: float = DEFAULT_TIMEOUT) -> bytes:
        """The next raw line from the proxy's stdout."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the proxy within {timeout}s; stderr:\n{self.stderr}") from None
        if line is None:
            self._lines.put(None)
            raise AssertionError(f"the proxy closed its stdout; stderr:\n{self.stderr}")
        return line

    def recv(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next message, stashed ones first."""
        if self._stash:
            return self._stash.pop(0)
        return json.loads(self.recv_line(timeout))

    def response(self, ident: Any, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Wait for the response with this id; other messages are kept for later ``recv`` calls."""
        for i, message in enumerate(self._stash):
            if message.get("id") == ident and "method" not in message:
                return self._stash.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.recv_line(max(0.01, deadline - time.monotonic())))
            if message.get("id") == ident and "method" not in message:
                return message
            self._stash.append(message)

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> dict[str, Any]:
        """Send a request with a fresh id and return its response."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(ident, timeout)

    def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, seq: int | None = None, **kw: Any
    ) -> dict[str, Any]:
        """A tools/call; ``seq`` becomes ``_meta.checkpoint_seq``."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if seq is not None:
            params["_meta"] = {"checkpoint_seq": seq}
        return self.request("tools/call", params, **kw)

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def close(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """Close stdin (client EOF) and wait for the proxy to exit."""
        if self.proc.stdin and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        return self.wait(timeout)

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the proxy did not exit within {timeout}s; stderr:\n{self.stderr}") from None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(DEFAULT_TIMEOUT)

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(DEFAULT_TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def read_effects(path: Path) -> list[dict[str, Any]]:
    """The side effects the effects server recorded, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def done_count(path: Path, tool: str | None = None) -> int:
    """How many times the upstream completed a side effect (of ``tool``)."""
    return sum(1 for e in read_effects(path) if e["event"] == "done" and (tool is None or e["tool"] == tool))


def wait_until(predicate: Any, timeout: float = DEFAULT_TIMEOUT, what: str = "condition") -> None:
    """Poll ``predicate`` until true (for effects written by another process), bounded."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def pids_in_group(pgid: int) -> bool:
    """True while any process of group ``pgid`` is running (zombies awaiting init's reaping do not count)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_bytes()
        except OSError:
            continue
        state, _ppid, pgrp = stat[stat.rfind(b")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state not in (b"Z", b"X"):
            return True
    return False


def journal_calls(location: str, workflow: str) -> list[Any]:
    """The rows of ``workflow`` in the journal at ``location`` (SQLite path or PostgreSQL URL)."""
    from checkpoint_mcp.journal import open_journal

    journal = open_journal(location)
    try:
        return journal.calls(workflow)
    finally:
        journal.close()


def journal_states(location: str, workflow: str) -> dict[int, Any]:
    """seq -> CallState of ``workflow``."""
    return {row.seq: row.state for row in journal_calls(location, workflow)}


def effects_proxy(journal: str, tmp_path: Path, *extra: str, trigger: str | None = None) -> ProxyProcess:
    """`checkpoint` journaling to ``journal`` in front of the effects server, whose side effects go to
    ``tmp_path / "effects.jsonl"``; ``trigger`` arms a named debug trigger (a crash at that point)."""
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    if trigger:
        env["CHECKPOINT_DEBUG_TRIGGER"] = trigger
    return ProxyProcess("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, *extra, env=env)


@contextlib.contextmanager
def write_lock(journal: str) -> Iterator[None]:
    """A SQLite journal's write lock, held by another connection until the block ends."""
    import sqlite3

    blocker = sqlite3.connect(journal, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        yield
        blocker.execute("ROLLBACK")
    finally:
        blocker.close()


def headless(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, saw: str = "") -> str:
    """Run an agent CLI headless to its end (its whole process group killed if it outlives ``timeout``, and the
    test failed with its output and ``saw``); its output. It must exit 0."""
    import pytest

    child = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, _ = child.communicate()
        pytest.fail(f"{Path(argv[0]).name} did not end within {timeout:g} s:\n{out[-3000:]}\n{saw}")
    assert child.returncode == 0, out[-3000:]
    return out


def approval_requests(location: str, workflow: str | None = None) -> list[Any]:
    """The approval requests of the journal at ``location`` (of ``workflow``, where given), newest first."""
    from checkpoint_mcp.journal import open_journal

    journal = open_journal(location)
    try:
        return journal.approvals.approvals(workflow)
    finally:
        journal.close()


def decide_request(location: str, approval_id: int, grant: bool = True, reason: str | None = None) -> str:
    """A person's decision on request ``approval_id``, stored as `checkpoint journal approve` stores it (by
    "alice"); returns the journal's location as commands name it (a PostgreSQL URL without its password)."""
    from checkpoint_mcp.journal import open_journal

    journal = open_journal(location)
    try:
        journal.approvals.decide_approval(approval_id, grant, "alice", reason)
        return journal.location
    finally:
        journal.close()


APPROVED_CALL_CRASHES = {
    "after_approval_used": (CallState.PENDING, {0}),
    "after_forward": (CallState.PENDING, {0, 1}),
    "after_upstream_reply": (CallState.PENDING, {1}),
    "after_complete_commit": (CallState.COMPLETED, {1}),
}
"""Where an approved call's proxy is killed (a CHECKPOINT_DEBUG_TRIGGER) -> (the call's row after the crash, the
times the upstream may have run it)."""


def session_start(location: str, tmp_path: Path, source: str) -> None:
    """What Claude Code's SessionStart hook runs at a start, a clear or a compaction: `checkpoint brief --hook`, in
    this process's client session (the proxies this process starts are that session's: it marks them)."""
    done = subprocess.run(
        checkpoint_argv(
            "brief", "--hook", "--project-root", str(tmp_path), "--journal", location, "--workflow-id", "wf"
        ),
        input=json.dumps({"hook_event_name": "SessionStart", "source": source}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "could not record the session start" not in done.stderr, done.stderr
