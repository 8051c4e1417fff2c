"""The MCP servers people install most, started as a user's ``.mcp.json`` would start them: the npm ones from
``.tools/servers`` (``scripts/_servers.sh`` installs tools/servers' lockfile) on tools/npm's Node 22, the PyPI
ones from this environment (pinned in the ``dev`` extra). Each is named by its reviewed profile
(``checkpoint_mcp/init/profiles/<name>.toml``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import nodetools

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / ".tools" / "servers" / "node_modules"
VENV_BIN = Path(sys.executable).parent
CHROMIUM = os.environ.get("CHECKPOINT_CHROMIUM", "/usr/bin/chromium")
GIT_ENV = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
GIT_AUTHOR = {
    "GIT_AUTHOR_NAME": "Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
}


@dataclass(frozen=True)
class RealServer:
    """One server: its profile's name, its package (npm or PyPI) and how it is started."""

    profile: str
    package: str
    npm_script: str | None = None
    """The script of the npm package that starts it (None: a PyPI console script named like the package)."""

    def installed_version(self) -> str:
        """The version installed here, which must be the one the profile was reviewed for."""
        if self.npm_script is None:
            return version(self.package)
        return str(json.loads((self._package_folder() / "package.json").read_text())["version"])

    def entry(self, folder: Path) -> dict[str, Any]:
        """The ``.mcp.json`` entry that starts it, with whatever it works on (a folder, a repository, a memory
        file) in ``folder``."""
        if self.npm_script is None:
            command, args = str(VENV_BIN / self.package), []
        else:
            command, args = str(nodetools.node22()), [str(self._package_folder() / self.npm_script)]
        entry: dict[str, Any] = {"command": command, "args": [*args, *_ARGS.get(self.profile, ())]}
        if self.profile == "filesystem":
            (folder / "files").mkdir(exist_ok=True)
            entry["args"].append(str(folder / "files"))
        elif self.profile == "git":
            entry["args"] += ["--repository", str(git_repository(folder / "repo"))]
            entry["env"] = {**GIT_ENV, **GIT_AUTHOR}
        elif self.profile == "memory":
            entry["env"] = {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}
        elif self.profile == "sequential-thinking":
            entry["env"] = {"DISABLE_THOUGHT_LOGGING": "true"}
        elif self.profile == "desktop-commander":
            entry["env"] = desktop_commander_env(folder)
        return entry

    def _package_folder(self) -> Path:
        folder = MODULES / self.package
        if not folder.exists():
            raise RuntimeError(f"{folder} is missing: run ./scripts/test (it installs tools/servers) first")
        return folder


_ARGS: dict[str, tuple[str, ...]] = {
    # root needs --no-sandbox; tools/list starts no browser (FACTS.md), a call starts Debian's chromium
    "playwright": ("--headless", "--isolated", "--no-sandbox", "--executable-path", CHROMIUM),
    "chrome-devtools": (
        "--headless",
        "--isolated",
        "--executablePath",
        CHROMIUM,
        "--chromeArg=--no-sandbox",
        "--no-usage-statistics",
        "--no-performance-crux",
    ),
}

SERVERS = (
    RealServer("playwright", "@playwright/mcp", "cli.js"),
    RealServer("chrome-devtools", "chrome-devtools-mcp", "build/src/bin/chrome-devtools-mcp.js"),
    RealServer("github", "@modelcontextprotocol/server-github", "dist/index.js"),
    RealServer("filesystem", "@modelcontextprotocol/server-filesystem", "dist/index.js"),
    RealServer("memory", "@modelcontextprotocol/server-memory", "dist/index.js"),
    RealServer("sequential-thinking", "@modelcontextprotocol/server-sequential-thinking", "dist/index.js"),
    RealServer("context7", "@upstash/context7-mcp", "dist/index.js"),
    RealServer("desktop-commander", "@wonderwhy-er/desktop-commander", "dist/index.js"),
    RealServer("commands", "mcp-server-commands", "build/index.js"),
    RealServer("git", "mcp-server-git"),
    RealServer("fetch", "mcp-server-fetch"),
    RealServer("time", "mcp-server-time"),
)
BY_PROFILE = {server.profile: server for server in SERVERS}


def desktop_commander_env(folder: Path) -> dict[str, str]:
    """Desktop Commander keeps its settings in ``~/.claude-server-commander/``: a home of its own under ``folder``,
    its telemetry off (``DESKTOP_COMMANDER_DISABLE_TELEMETRY``), and its feature flags asked of a port that refuses
    (``DC_FLAG_URL``), so that it calls nothing outside this machine."""
    home = folder / "dc-home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "DESKTOP_COMMANDER_DISABLE_TELEMETRY": "1",
        "DC_FLAG_URL": "http://127.0.0.1:9/flags.json",
    }


def git(repository: Path, *args: str) -> str:
    """``git ARGS`` in ``repository``, as a test reads or sets up what the agent's git server sees."""
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repository,
        env={**os.environ, **GIT_ENV},
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout


def git_repository(path: Path) -> Path:
    """A repository on ``main`` with one commit, made once."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")
        (path / "README.md").write_text("hello\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "first")
    return path
