"""`init` where the clients run: on Windows a wrapped entry is a cmd.exe command line (``cmd /c npx …`` entries keep
working, no POSIX quoting); for a macOS app that launchd starts, a bare command becomes absolute."""

from __future__ import annotations

import mslex

from checkpoint_mcp.init import wrap
from checkpoint_mcp.init.clients import StdioEntry

LAUNCHER = wrap.Launcher("C:\\Python\\Scripts\\checkpoint.exe")
WRAPPING = wrap.Wrapping(LAUNCHER, "C:\\proj\\.checkpoint\\journal.db")


def test_a_cmd_c_entry_becomes_one_cmd_exe_command_line_that_gives_back_its_argv() -> None:
    argv = ["cmd", "/c", "npx", "-y", "@modelcontextprotocol/server-filesystem", "C:\\Users\\me\\My Project"]
    line = wrap.shell_command(argv, {}, windows=True)
    assert line == 'cmd /c npx -y @modelcontextprotocol/server-filesystem "C:\\Users\\me\\My Project"'
    assert mslex.split(line) == argv


def test_on_windows_a_client_variable_moves_into_env_and_cmd_exe_expands_it() -> None:
    env: dict[str, str] = {}
    line = wrap.shell_command(["npx", "server", "--token", "${input:token}"], env, windows=True)
    assert line == 'npx server --token "%CHECKPOINT_ARG_3%"'
    assert env == {"CHECKPOINT_ARG_3": "${input:token}"}


def test_for_a_launchd_app_a_bare_command_on_the_users_path_is_written_absolute() -> None:
    found = {"npx": "/opt/homebrew/bin/npx", "git": "/usr/bin/git"}
    launcher = wrap.for_launchd(wrap.Launcher("/Users/me/.local/bin/checkpoint"), found.get)
    entry = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    wrapped = wrap.wrap(
        "memory",
        entry,
        StdioEntry("npx", ("-y", "@modelcontextprotocol/server-memory")),
        wrap.Wrapping(launcher, "/j.db"),
    )
    assert wrapped["command"] == "/Users/me/.local/bin/checkpoint"
    upstream = wrapped["args"][wrapped["args"].index("--upstream-cmd") + 1]
    assert upstream == "/opt/homebrew/bin/npx -y @modelcontextprotocol/server-memory"
    assert wrap.absolute_command("git", found.get) == "git"  # on launchd's PATH already
    assert wrap.absolute_command("./server", found.get) == "./server"  # a path is the user's own
    assert wrap.absolute_command("uvx", found.get) == "uvx"  # not found here: left for the client to find


def test_elsewhere_commands_are_written_as_they_are() -> None:
    entry = {"command": "npx", "args": ["-y", "x"]}
    wrapped = wrap.wrap("x", entry, StdioEntry("npx", ("-y", "x")), WRAPPING)
    assert wrapped["args"][wrapped["args"].index("--upstream-cmd") + 1].startswith("npx ")
