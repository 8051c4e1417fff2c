"""A wrapped entry's --upstream-cmd, run by a real /bin/sh, starts exactly the original argv."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from checkpoint_mcp.init import clients, wrap

from .entries import RECORDER, expand_like_claude

WRAPPING = wrap.Wrapping(wrap.Launcher("/opt/bin/checkpoint"), "/p/.checkpoint/journal.db")
CLIENT_ENV = {
    "TOKEN": 's3cr\'et "value" $HOME `id`',
    "HOME": "/home/someone",
    "PATH": "/usr/bin:/bin",
    "PY": sys.executable,
}

argument = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
hostile = st.sampled_from(
    ["${TOKEN}", "$HOME", "${UNSET}", "${UNSET:-fallback}", "a ${TOKEN} b", "'", '"', "\\", "`id`"]
)


def upstream(entry: dict[str, Any]) -> tuple[str, dict[str, str]]:
    wrapped = wrap.wrap("s", entry, clients.classify("s", entry, "/p/.mcp.json"), WRAPPING)
    args = wrapped["args"]
    assert wrapped["command"] == "/opt/bin/checkpoint"
    assert args[:4] == ["--journal", "/p/.checkpoint/journal.db", "--workflow-id", "s"]
    return args[args.index("--upstream-cmd") + 1], wrapped.get("env", {})


def run_by_shell(command: str, env: dict[str, str]) -> list[str]:
    """What /bin/sh -c starts, with the environment a Claude-like client gives (its variables expanded)."""
    full = {**CLIENT_ENV, **{k: expand_like_claude(v, CLIENT_ENV) for k, v in env.items()}}
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, env=full, timeout=20, check=True)
    return json.loads(done.stdout)["argv"]


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.lists(st.one_of(argument, hostile), max_size=6))
@example(args=["it's", 'say "hi"', "a b", "", "\n", "$(id)", "${TOKEN}", "--flag=${TOKEN:-x}", "~", "*", ";", "&&"])
def test_the_shell_runs_exactly_the_argv_the_client_would_have_started(args: list[str]) -> None:
    entry = {"command": sys.executable, "args": [str(RECORDER), *args], "env": {"KEEP": "1"}}
    command, env = upstream(entry)
    expected = [expand_like_claude(a, CLIENT_ENV) for a in args]
    assert run_by_shell(command, env) == expected
    assert env["KEEP"] == "1"


def test_a_secret_reference_never_reaches_the_proxy_command_line() -> None:
    entry = {"command": sys.executable, "args": [str(RECORDER), "--token", "${TOKEN}"], "env": {"API_KEY": "${TOKEN}"}}
    command, env = upstream(entry)
    assert "${TOKEN}" not in command
    assert "TOKEN" not in command
    assert env == {"API_KEY": "${TOKEN}", "CHECKPOINT_ARG_3": "${TOKEN}"}
    assert run_by_shell(command, env) == ["--token", CLIENT_ENV["TOKEN"]]


def test_a_command_holding_a_variable_moves_into_the_environment_too() -> None:
    entry = {"command": "${PY}", "args": [str(RECORDER), "x"]}
    command, env = upstream(entry)
    assert command.startswith('"$CHECKPOINT_ARG_0" ')
    assert env == {"CHECKPOINT_ARG_0": "${PY}"}
    assert run_by_shell(command, env) == ["x"]


def test_an_existing_variable_of_the_same_name_is_never_overwritten() -> None:
    entry = {"command": sys.executable, "args": [str(RECORDER), "${TOKEN}"], "env": {"CHECKPOINT_ARG_2": "mine"}}
    command, env = upstream(entry)
    assert env == {"CHECKPOINT_ARG_2": "mine", "CHECKPOINT_ARG_2_2": "${TOKEN}"}
    assert run_by_shell(command, env) == [CLIENT_ENV["TOKEN"]]


def test_an_http_entry_keeps_its_header_values_in_the_environment_as_written() -> None:
    entry = {
        "type": "http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer ${TOKEN}", "X-Api-Key": "literal-key"},
        "oauth": {"clientId": "kept"},
    }
    wrapped = wrap.wrap("pay", entry, clients.classify("pay", entry, "/p/.mcp.json"), WRAPPING)
    assert wrapped == {
        "type": "stdio",
        "command": "/opt/bin/checkpoint",
        "args": [
            "--journal",
            "/p/.checkpoint/journal.db",
            "--workflow-id",
            "pay",
            "--name",
            "pay",
            "--upstream-url",
            "https://mcp.example.com/mcp",
            "--upstream-header-env",
            "Authorization=CHECKPOINT_HEADER_AUTHORIZATION",
            "--upstream-header-env",
            "X-Api-Key=CHECKPOINT_HEADER_X_API_KEY",
        ],
        "oauth": {"clientId": "kept"},
        "env": {"CHECKPOINT_HEADER_AUTHORIZATION": "Bearer ${TOKEN}", "CHECKPOINT_HEADER_X_API_KEY": "literal-key"},
    }


def test_unknown_fields_stay_where_they_were_and_a_policy_is_passed() -> None:
    entry = {
        "x-first": 1,
        "type": "stdio",
        "command": "srv",
        "args": ["--a"],
        "cwd": "/somewhere",
        "x-last": {"k": [1]},
    }
    wrapping = wrap.Wrapping(wrap.Launcher("/usr/bin/python3", ("-m", "checkpoint_mcp")), "/j.db", "/p/policy.toml")
    wrapped = wrap.wrap("srv", entry, clients.classify("srv", entry, "/p/.mcp.json"), wrapping)
    assert list(wrapped) == ["x-first", "type", "command", "args", "cwd", "x-last"]
    assert wrapped["args"] == [
        "-m",
        "checkpoint_mcp",
        "--journal",
        "/j.db",
        "--workflow-id",
        "srv",
        "--policy",
        "/p/policy.toml",
        "--name",
        "srv",
        "--upstream-cmd",
        "srv --a",
    ]
    assert wrap.runs_checkpoint(wrapped)


def test_the_launcher_is_the_running_console_script_else_this_interpreter(tmp_path: Any) -> None:
    script = tmp_path / "bin" / "checkpoint"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert wrap.launcher(str(script), "/usr/bin/python3") == wrap.Launcher(str(script))
    assert wrap.launcher("checkpoint", "/usr/bin/python3", lambda name: str(script)) == wrap.Launcher(str(script))
    module = "/x/checkpoint_mcp/__main__.py"
    assert wrap.launcher(module, "/v/bin/python") == wrap.Launcher("/v/bin/python", ("-m", "checkpoint_mcp"))
    assert wrap.Launcher("/a b/checkpoint").shell("brief", "--hook") == "'/a b/checkpoint' brief --hook"
