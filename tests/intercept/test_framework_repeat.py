"""A real agent framework that cannot pass `_meta`: `langchain-mcp-adapters` opens a new session, so a new
`checkpoint`, for every tool call. Calling a tool twice with the same arguments through the proxy is caught by
the tool policy. The framework needs mcp<2, so it runs from its own environment, .venv-langchain, made by
scripts/_langchain.sh (scripts/test runs it; so does this test when the environment is missing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import done_count, server_cmd

ROOT = Path(__file__).parents[2]
FRAMEWORK_PYTHON = ROOT / ".venv-langchain" / "bin" / "python"
DRIVER = ROOT / "tests" / "clients" / "langchain_repeat.py"


@pytest.fixture(scope="session")
def framework_python() -> Path:
    """The Python of .venv-langchain, made now if it is missing (a few seconds when pip's cache is warm)."""
    subprocess.run(["bash", str(ROOT / "scripts" / "_langchain.sh")], check=True, timeout=600)
    assert FRAMEWORK_PYTHON.exists()
    return FRAMEWORK_PYTHON


def run_agent(framework_python: Path, tmp_path: Path, policy: str | None) -> list[dict[str, Any]]:
    args = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(tmp_path / "j.db")]
    if policy is not None:
        (tmp_path / "policy.toml").write_text(policy, encoding="utf-8")
        args += ["--policy", str(tmp_path / "policy.toml")]
    mail = json.dumps({"to": "bob@example.com", "subject": "Your invoice"})
    done = subprocess.run(
        [str(framework_python), str(DRIVER), sys.executable, "send_email", mail, "--", *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={**os.environ, "EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_langchain_repeating_a_call_without_a_policy_sends_it_twice(framework_python: Path, tmp_path: Path) -> None:
    first, second = run_agent(framework_python, tmp_path, None)
    assert first["ok"]
    assert second["ok"]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2  # what the policy is for


def test_langchain_repeating_a_call_is_replayed_under_repeat_replay(framework_python: Path, tmp_path: Path) -> None:
    first, second = run_agent(framework_python, tmp_path, '[tools.send_email]\nrepeat = "replay"\n')
    assert first["ok"]
    assert second["ok"]
    assert "sent to bob@example.com" in second["content"]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1


def test_langchain_repeating_a_call_is_refused_under_repeat_refuse(framework_python: Path, tmp_path: Path) -> None:
    first, second = run_agent(framework_python, tmp_path, '[default]\nrepeat = "refuse"\n')
    assert first["ok"]
    assert not second["ok"]
    assert "repeat refused, not run: send_email already ran" in second["error"]
    assert "(call #1," in second["error"]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
