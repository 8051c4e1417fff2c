"""``benchmarks/profile_proxy.py`` tells the kernel's time from the code that asked for it.

py-spy's native stacks end in libc's wrapper of a system call when a sample was taken in the kernel: such a sample
under SQLite's frames is SQLite's system calls, not its CPU; ``epoll_wait`` and ``fdatasync`` keep their own
buckets. The user/system split read from ``/proc/<pid>/stat`` is checked against this process's own CPU.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

SQLITE = "SqliteJournal.write (checkpoint_mcp/journal/sqlite.py:312);_pysqlite_query_execute (cursor.c:847)"
STACKS = {
    f"<module> (checkpoint_mcp/__main__.py:5);{SQLITE};sqlite3VdbeExec (libsqlite3.so.0.8.6)": 3,
    f"<module> (checkpoint_mcp/__main__.py:5);{SQLITE};pwrite64 (libc.so.6)": 5,
    f"<module> (checkpoint_mcp/__main__.py:5);{SQLITE};__libc_fcntl64 (libc.so.6)": 2,
    f"<module> (checkpoint_mcp/__main__.py:5);{SQLITE};fdatasync (libc.so.6)": 7,
    "<module> (checkpoint_mcp/__main__.py:5);EpollSelector.select (selectors.py:468);epoll_wait (libc.so.6)": 11,
    "<module> (x.py:1);_UnixWritePipeTransport.write (asyncio/unix_events.py:704);write (libc.so.6)": 4,
    "<module> (x.py:1);_UnixWritePipeTransport.write (asyncio/unix_events.py:704);os_write (libpython3.11.so)": 1,
}


@pytest.fixture
def profile_proxy() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import profile_proxy

        yield profile_proxy
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_system_calls_under_sqlite_are_counted_as_kernel_time_not_sqlite_cpu(
    profile_proxy: ModuleType, tmp_path: Path
) -> None:
    raw = tmp_path / "stacks.txt"
    raw.write_text("".join(f"{stack} {count}\n" for stack, count in STACKS.items()), encoding="utf-8")
    categories, _, total = profile_proxy.analyse(raw)
    assert total == sum(STACKS.values())
    assert dict(categories) == {
        "SQLite statements (user CPU)": 3,
        "SQLite's system calls (kernel: pwrite, fcntl locks, reads)": 7,
        "fsync in COMMIT": 7,
        "idle: waiting for input (epoll)": 11,
        "pipe write → system calls (kernel)": 4,
        "pipe write": 1,
    }


def test_the_proc_split_sees_user_and_kernel_time_apart(profile_proxy: ModuleType) -> None:
    user, system = profile_proxy.cpu_times(os.getpid())
    user_after, system_after = user, system
    deadline = time.monotonic() + 10.0
    while user_after - user < 0.2 and time.monotonic() < deadline:
        end = time.monotonic() + 0.05
        while time.monotonic() < end:  # user CPU only (the clock is read without a system call)
            sum(range(1000))
        user_after, system_after = profile_proxy.cpu_times(os.getpid())
    assert user_after - user >= 0.2
    assert system_after - system < (user_after - user) / 2
