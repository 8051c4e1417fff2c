"""Run `checkpoint init` as a real process, and start a configured server entry the way a client does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters

from support import checkpoint_argv

RECORDER = Path(__file__).parent / "argv_recorder.py"
_CLAUDE_VARIABLE = re.compile(r"\$\{([^}:]+)(?::-([^}]*))?\}")


def run_init(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m checkpoint_mcp init ARGS`: its exit code, stdout (the diffs) and stderr (the summary)."""
    return subprocess.run(
        checkpoint_argv("init", *args),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=60,
        check=False,
    )


def expand_like_claude(text: str, environ: Mapping[str, str]) -> str:
    """Claude Code's expansion of a configuration string: ``${VAR}`` and ``${VAR:-default}``; an unset
    variable without a default stays as written (verified with Claude Code 2.1.328)."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        return default if default is not None else match.group(0)

    return _CLAUDE_VARIABLE.sub(one, text)


def launch_argv(entry: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment a client like Claude Code starts a stdio ``entry`` with."""
    argv = [
        expand_like_claude(entry["command"], environ),
        *(expand_like_claude(a, environ) for a in entry.get("args", [])),
    ]
    env = {**environ, **{k: expand_like_claude(v, environ) for k, v in entry.get("env", {}).items()}}
    return argv, env


def stdio_params(entry: Mapping[str, Any], environ: Mapping[str, str], cwd: Path) -> StdioServerParameters:
    """The official SDK client's parameters for a stdio ``entry``, started as a client does."""
    argv, env = launch_argv(entry, environ)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))


def servers(path: Path, key: str = "mcpServers") -> dict[str, Any]:
    return json.loads(path.read_text())[key]


def python_entry(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A stdio entry that runs this interpreter."""
    entry: dict[str, Any] = {"command": sys.executable, "args": list(args)}
    if env is not None:
        entry["env"] = env
    return entry
