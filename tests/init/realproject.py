"""A project whose ``.mcp.json`` names real MCP servers: the reference server-everything (npm), mcp-server-time,
mcp-server-git (PyPI) and one over Streamable HTTP, in folders whose names need quoting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nodetools

VENV_BIN = Path(sys.executable).parent
HTTP_TOKEN = 'tok\'en with "quotes" and $dollars'


def git_repository(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first"],
    ):
        subprocess.run(argv, cwd=path, env=env, check=True, capture_output=True, timeout=30)
    return path


def mcp_json(repository: Path, http_url: str) -> dict[str, Any]:
    everything = nodetools.MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return {
        "mcpServers": {
            "everything": {"command": str(nodetools.node22()), "args": [str(everything)], "env": {"SECRET_KEY": "s3"}},
            "time": {"command": str(VENV_BIN / "mcp-server-time"), "args": ["--local-timezone", "Europe/Paris"]},
            "git": {
                "type": "stdio",
                "command": str(VENV_BIN / "mcp-server-git"),
                "args": ["--repository", str(repository)],
            },
            "remote": {"type": "http", "url": http_url, "headers": {"X-Test-Token": "${HTTP_TOKEN}"}},
        }
    }


def make_project(root: Path, http_url: str) -> Path:
    """``root/my "project"`` with a git repository in it and the ``.mcp.json`` above; returns the project."""
    project = root / 'my "project"'
    repository = git_repository(project / "repo with space")
    (project / ".mcp.json").write_text(json.dumps(mcp_json(repository, http_url), indent=2))
    return project
