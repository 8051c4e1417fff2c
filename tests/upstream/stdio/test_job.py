"""The Windows process tree, a Job Object, driven against a fake of pywin32's calls that behaves as Windows does:
a job made to kill its members when its last handle closes, the upstream assigned to it (its process handle
closed after), the whole job terminated by ``kill_tree`` and when we let it go, and an upstream that could not be
put in a job still ended. The processes are real (``sleep``); only the Windows calls are fake."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KILL_ON_JOB_CLOSE = 0x2000
EXTENDED, ACCOUNTING = 9, 1


class FakeError(Exception):
    def __init__(self, winerror: int, funcname: str, strerror: str) -> None:
        super().__init__(winerror, funcname, strerror)
        self.winerror, self.funcname, self.strerror = winerror, funcname, strerror


class FakeWindows:
    """Jobs and process handles as Windows keeps them, with their members real Linux processes."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.jobs: dict[int, dict[str, Any]] = {}
        self.processes: dict[int, int] = {}  # open process handle -> pid
        self.next_handle = 100
        self.fail: set[str] = set()

    def _handle(self) -> int:
        self.next_handle += 1
        return self.next_handle

    def _maybe_fail(self, name: str) -> None:
        self.calls.append((name,))
        if name in self.fail:
            raise FakeError(5, name, "Access is denied.")

    def CreateJobObject(self, attributes: Any, name: str) -> int:
        self._maybe_fail("CreateJobObject")
        job = self._handle()
        self.jobs[job] = {"flags": 0, "members": set(), "open": True}
        return job

    def QueryInformationJobObject(self, job: int, info_class: int) -> dict[str, Any]:
        if info_class == EXTENDED:
            return {"BasicLimitInformation": {"LimitFlags": self.jobs[job]["flags"]}}
        members = self.jobs[job]["members"]
        return {"ActiveProcesses": sum(1 for pid in members if _running(pid))}

    def SetInformationJobObject(self, job: int, info_class: int, info: dict[str, Any]) -> None:
        self._maybe_fail("SetInformationJobObject")
        self.jobs[job]["flags"] = info["BasicLimitInformation"]["LimitFlags"]

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:
        self._maybe_fail("OpenProcess")
        handle = self._handle()
        self.processes[handle] = pid
        return handle

    def AssignProcessToJobObject(self, job: int, process: int) -> None:
        self._maybe_fail("AssignProcessToJobObject")
        self.jobs[job]["members"].add(self.processes[process])

    def TerminateJobObject(self, job: int, code: int) -> None:
        self.calls.append(("TerminateJobObject", job))
        self._kill(job)

    def CloseHandle(self, handle: int) -> None:
        self.calls.append(("CloseHandle", handle))
        if handle in self.processes:
            del self.processes[handle]
        elif handle in self.jobs:
            self.jobs[handle]["open"] = False
            if self.jobs[handle]["flags"] & KILL_ON_JOB_CLOSE:
                self._kill(handle)

    def _kill(self, job: int) -> None:
        for pid in self.jobs[job]["members"]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeWindows, Any]]:
    """The fake, and ``job.py`` imported as Windows would import it."""
    fake = FakeWindows()
    pywintypes = types.ModuleType("pywintypes")
    pywintypes.error = FakeError  # type: ignore[attr-defined]
    win32api = types.ModuleType("win32api")
    win32api.OpenProcess = fake.OpenProcess  # type: ignore[attr-defined]
    win32api.CloseHandle = fake.CloseHandle  # type: ignore[attr-defined]
    win32con = types.ModuleType("win32con")
    win32con.PROCESS_SET_QUOTA, win32con.PROCESS_TERMINATE = 0x100, 0x1  # type: ignore[attr-defined]
    win32job = types.ModuleType("win32job")
    for name in ("CreateJobObject", "QueryInformationJobObject", "SetInformationJobObject"):
        setattr(win32job, name, getattr(fake, name))
    win32job.AssignProcessToJobObject = fake.AssignProcessToJobObject  # type: ignore[attr-defined]
    win32job.TerminateJobObject = fake.TerminateJobObject  # type: ignore[attr-defined]
    win32job.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = KILL_ON_JOB_CLOSE  # type: ignore[attr-defined]
    win32job.JobObjectExtendedLimitInformation = EXTENDED  # type: ignore[attr-defined]
    win32job.JobObjectBasicAccountingInformation = ACCOUNTING  # type: ignore[attr-defined]
    for module in (pywintypes, win32api, win32con, win32job):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0x200, raising=False)
    monkeypatch.setattr(subprocess, "CREATE_NO_WINDOW", 0x8000000, raising=False)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delitem(sys.modules, "checkpoint_mcp.upstream.stdio.job", raising=False)
    job = importlib.import_module("checkpoint_mcp.upstream.stdio.job")
    monkeypatch.setattr(sys, "platform", "linux")
    yield fake, job
    sys.modules.pop("checkpoint_mcp.upstream.stdio.job", None)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()


def test_the_upstream_goes_into_a_job_that_kills_it_when_our_handle_closes(
    windows: tuple[FakeWindows, Any], sleeper: subprocess.Popen[bytes]
) -> None:
    fake, job = windows
    tree = job.JobTree(sleeper, job._job_for(sleeper.pid))
    (handle,) = fake.jobs
    assert fake.jobs[handle]["flags"] & KILL_ON_JOB_CLOSE
    assert fake.jobs[handle]["members"] == {sleeper.pid}
    assert fake.processes == {}  # the process handle was closed once assigned
    assert tree.tree_alive()
    tree.close()  # as when the proxy dies: Windows closes its handles
    assert sleeper.wait(timeout=5) == -signal.SIGKILL
    assert not fake.jobs[handle]["open"]


def test_kill_tree_terminates_the_whole_job(windows: tuple[FakeWindows, Any], sleeper: subprocess.Popen[bytes]) -> None:
    fake, job = windows
    tree = job.JobTree(sleeper, job._job_for(sleeper.pid))
    tree.terminate()  # Windows has no group SIGTERM: terminating is ending the job
    assert ("TerminateJobObject", next(iter(fake.jobs))) in fake.calls
    assert tree.wait() == -signal.SIGKILL
    assert not tree.tree_alive()
    assert not tree.keeps_tree
    assert tree.watched_pid is None  # a thread waits: Windows has no pidfd


@pytest.mark.parametrize("failing", ["CreateJobObject", "SetInformationJobObject", "AssignProcessToJobObject"])
def test_an_upstream_that_cannot_be_put_in_a_job_is_warned_about_and_still_ended(
    windows: tuple[FakeWindows, Any], sleeper: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture, failing: str
) -> None:
    fake, job = windows
    fake.fail.add(failing)
    with caplog.at_level(logging.WARNING, logger="checkpoint_mcp.upstream.stdio.job"):
        handle = job._job_for(sleeper.pid)
    assert handle is None
    assert "is in no Job Object" in caplog.text
    assert all(not each["open"] for each in fake.jobs.values())  # a job made before the failure is closed
    assert fake.processes == {}
    tree = job.JobTree(sleeper, None)
    assert tree.tree_alive()
    tree.kill_tree()
    assert sleeper.wait(timeout=5) == -signal.SIGKILL
    assert not tree.tree_alive()
