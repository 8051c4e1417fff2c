"""Command lines: the shell each platform runs ``--upstream-cmd`` with, and an argv written as one string that the
platform's shell turns back into exactly that argv."""

from __future__ import annotations

import subprocess

import mslex
import pytest

from checkpoint_mcp.platforms import commands

HARD = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "C:\\Users\\me\\My Project", "a&b|c", "50%", 'say "hi"']


def test_posix_runs_the_command_with_bin_sh() -> None:
    assert commands.shell_args("echo hi", windows=False) == ["/bin/sh", "-c", "echo hi"]
    assert commands.shell_name(windows=False) == "/bin/sh"


def test_windows_runs_the_command_with_cmd_exe_as_subprocess_does_with_shell_true(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COMSPEC", "C:\\Windows\\system32\\cmd.exe")
    assert (
        commands.shell_args("npx -y server", windows=True)
        == '"C:\\Windows\\system32\\cmd.exe" /d /s /c "npx -y server"'
    )
    assert commands.shell_name(windows=True) == "cmd.exe"


def test_a_posix_command_line_gives_back_the_argv_through_a_real_shell() -> None:
    line = commands.join(["printf", "%s\\n", *HARD], windows=False)
    out = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, check=True, timeout=10).stdout
    assert out.splitlines() == HARD


def test_a_windows_command_line_gives_back_the_argv_and_leaves_nothing_to_cmd_exe() -> None:
    line = commands.join(HARD, windows=True)
    assert "'" not in line  # no POSIX quoting: cmd.exe would pass the quotes on
    assert mslex.split(line) == HARD  # what cmd.exe and the C runtime make of it
    assert commands.quote("C:\\My Project", windows=True) == '"C:\\My Project"'
