"""`checkpoint --version`: alone it prints Checkpoint's version, as every command-line tool does; with a value it is
still the spec's server identity. Driven through the installed console script, as a user types it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp import __version__

from support import ProxyProcess, server_cmd

CHECKPOINT = Path(sys.executable).parent / "checkpoint"  # the console script `pip install` / `uv tool` puts there


def run_checkpoint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECKPOINT), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["-V"],
        ["--log-level", "info", "--version"],
        ["--upstream-cmd", "exit 3", "--journal", "j.db", "--version"],
        ["--version", "--upstream-cmd", "exit 3"],
        ["--version", "serve"],
        ["--version", "init"],
        ["serve", "--version"],
        ["serve", "--listen", "127.0.0.1:0", "--version"],
    ],
    ids=" ".join,
)
def test_version_given_alone_prints_checkpoints_version_and_runs_nothing(tmp_path: Path, args: list[str]) -> None:
    result = run_checkpoint(*args, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"checkpoint {__version__}\n", "")
    assert list(tmp_path.iterdir()) == []  # no journal opened, no `init` run, no gateway started


def test_version_with_a_value_still_sets_the_server_identity_the_client_sees(tmp_path: Path) -> None:
    args = ["--version", "9.8.7", "--upstream-cmd", server_cmd("effects_server.py"), "--journal", "j.db"]
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    with ProxyProcess(*args, env=env, cwd=tmp_path, command=[str(CHECKPOINT)]) as proxy:
        result = proxy.initialize()["result"]
        assert result["serverInfo"]["version"] == "9.8.7"
        assert result["serverInfo"]["name"] == "checkpoint"
        assert proxy.close() == 0


@pytest.mark.parametrize("command", [[], ["serve"]])
def test_help_names_both_meanings_of_version(tmp_path: Path, command: list[str]) -> None:
    result = run_checkpoint(*command, "--help", cwd=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--version VERSION Server version the client" in text
    assert "Alone, with no VERSION: print Checkpoint's version and exit." in text
