"""Every module a command needs imports on Windows, simulated here: in a fresh interpreter the POSIX-only modules
and names are taken away, ``sys.platform`` says ``win32``, and Windows' own modules are stubbed; then every module
of the package is imported (the third-party ones it imports were imported first, with the real platform: their
portability is theirs). The modules that hold POSIX's process trees refuse, by name, and nothing else imports
them; the paths chosen are Windows'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SIMULATE = r"""
import ast, importlib, json, os, pathlib, pkgutil, signal, select, subprocess, sys, types

package = pathlib.Path(sys.argv[1])
# The third-party modules our modules import, with the real platform first.
for path in package.rglob("*.py"):
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in ("checkpoint_mcp", "fcntl", "termios", "pwd", "grp", "resource", "msvcrt",
                                      "pywintypes", "win32api", "win32con", "win32job", "win32file", "winerror",
                                      "_win32typing", "uvloop", "ctypes"):
                continue
            try:
                importlib.import_module(name)
            except ImportError:
                pass

# Windows, as far as Python can tell.
POSIX_MODULES = ["fcntl", "termios", "pwd", "grp", "resource", "posix"]
for name in POSIX_MODULES:
    sys.modules[name] = None
POSIX_OS = ["fork", "forkpty", "killpg", "setsid", "setpgid", "getpgid", "getpgrp", "pidfd_open", "fchmod",
            "fchown", "pread", "pwrite", "uname", "O_DIRECTORY", "O_CLOEXEC", "WNOHANG", "WIFEXITED",
            "WEXITSTATUS", "WIFSIGNALED", "WTERMSIG", "sched_getaffinity", "getuid", "geteuid", "getppid_",
            "posix_spawn", "wait3", "wait4"]
POSIX_SIGNAL = ["SIGKILL", "SIGCHLD", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGPIPE", "SIGXFSZ", "SIGALRM", "SIGQUIT",
                "pthread_sigmask", "sigwait", "SIG_BLOCK", "SIG_UNBLOCK", "SIG_SETMASK", "setitimer", "siginterrupt"]
for module, names in ((os, POSIX_OS), (signal, POSIX_SIGNAL), (select, ["epoll", "EPOLLIN", "poll"])):
    for name in names:
        if hasattr(module, name):
            delattr(module, name)
signal.SIGBREAK = 21
os.O_BINARY = 0x8000
subprocess.CREATE_NEW_PROCESS_GROUP = 0x200
subprocess.CREATE_NO_WINDOW = 0x8000000
sys.platform = "win32"

def stub(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module

class WinError(Exception):
    pass

stub("msvcrt", get_osfhandle=lambda fd: fd, locking=None, LK_NBLCK=2)
stub("pywintypes", error=WinError, OVERLAPPED=object)
stub("win32api", OpenProcess=None, CloseHandle=None)
stub("win32con", PROCESS_SET_QUOTA=256, PROCESS_TERMINATE=1, LOCKFILE_EXCLUSIVE_LOCK=2, LOCKFILE_FAIL_IMMEDIATELY=1)
stub("win32job", CreateJobObject=None, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE=0x2000)
stub("win32file", LockFileEx=None, UnlockFileEx=None)
stub("winerror", ERROR_LOCK_VIOLATION=33, ERROR_NOT_LOCKED=158)

imported, refused = [], {}
import checkpoint_mcp
for info in pkgutil.walk_packages(checkpoint_mcp.__path__, "checkpoint_mcp."):
    try:
        importlib.import_module(info.name)
    except AssertionError as exc:
        refused[info.name] = str(exc)
    else:
        imported.append(info.name)

from checkpoint_mcp.platforms import commands
from checkpoint_mcp.platforms.host import HOST
print(json.dumps({
    "imported": imported,
    "refused": refused,
    "host": {"tree": HOST.tree.value, "locks": HOST.locks.value, "modes": HOST.modes,
             "loop_pipes": HOST.loop_pipes, "loop_signals": HOST.loop_signals},
    "shell": commands.shell_name(),
    "posix_loaded_by": sorted(n for n in ("checkpoint_mcp.upstream.stdio.keeper", "checkpoint_mcp.upstream.stdio.group")
                              if n in sys.modules),
}))
"""

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "checkpoint_mcp"
COMMANDS = [
    "checkpoint_mcp.cli.main",
    "checkpoint_mcp.proxy.runner",
    "checkpoint_mcp.proxy.relay",
    "checkpoint_mcp.upstream.stdio.process",
    "checkpoint_mcp.upstream.stdio.child",
    "checkpoint_mcp.upstream.stdio.job",
    "checkpoint_mcp.gateway.runner",
    "checkpoint_mcp.session.server",
    "checkpoint_mcp.session.store",
    "checkpoint_mcp.journal.sqlite",
    "checkpoint_mcp.journal.owner_lock",
    "checkpoint_mcp.init.command",
    "checkpoint_mcp.cli.reconcile",
    "checkpoint_mcp.ui.app",
]


def test_every_module_a_command_needs_imports_with_windows_simulated() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SIMULATE, str(PACKAGE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(COMMANDS) <= set(report["imported"]), set(COMMANDS) - set(report["imported"])
    assert set(report["refused"]) == {
        "checkpoint_mcp.upstream.stdio.keeper",
        "checkpoint_mcp.upstream.stdio.group",
    }, report["refused"]
    assert all("process.spawn chooses" in why for why in report["refused"].values())
    assert report["posix_loaded_by"] == []  # nothing imports them on Windows: they refused, and stayed out
    assert report["host"] == {
        "tree": "job",
        "locks": "range",
        "modes": False,
        "loop_pipes": False,
        "loop_signals": False,
    }
    assert report["shell"] == "cmd.exe"
