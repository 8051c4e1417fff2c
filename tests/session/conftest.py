"""Fixtures for the session server's tests: hermetic git repositories and real `checkpoint session` servers.

Every test runs with an empty global git config, so the developer's own settings (hooks, signing, autocrlf)
cannot change an outcome, and without the variables that pick a project root, so each test sets the ones it
means to test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters

from .helpers import FIXTURES
from support import with_umask

ROOT_VARIABLES = ("CHECKPOINT_PROJECT_ROOT", "CLAUDE_PROJECT_DIR", "CHECKPOINT_DEBUG_TRIGGER")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty global git config and no root variables, in this process and in every server it starts."""
    config = tmp_path_factory.mktemp("gitconfig") / "config"
    config.write_text("[init]\n\tdefaultBranch = main\n")
    env = {
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ROOT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return env


class Git(Protocol):
    def __call__(self, repo: Path, *args: str, stdin: str | None = None) -> str: ...


@pytest.fixture
def git() -> Git:
    """Run git in a repository and return its stdout; fail the test on a non-zero exit."""

    def run(repo: Path, *args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            ["git", *args], cwd=repo, input=stdin, capture_output=True, encoding="utf-8", check=False
        )
        assert result.returncode == 0, f"git {' '.join(args)} failed: {result.stderr}"
        return result.stdout

    return run


@pytest.fixture
def repo(tmp_path: Path, git: Git) -> Path:
    """A git repository `my-app` with one commit holding a `.gitignore` that ignores the checkpoint files."""
    root = tmp_path / "my-app"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".gitignore").write_text(".claude-checkpoint*\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "initial")
    return root


@pytest.fixture
def spec_checkpoint() -> bytes:
    """The `.claude-checkpoint` file from the spec's example, byte for byte."""
    return (FIXTURES / "spec_example.claude-checkpoint").read_bytes()


@pytest.fixture
def spec_brief() -> str:
    """The resume brief from the spec's example."""
    return (FIXTURES / "spec_example_brief.md").read_text()


@pytest.fixture
def spec_save_arguments(spec_checkpoint: bytes) -> dict[str, Any]:
    """save_session_checkpoint arguments that reproduce the spec's example checkpoint."""
    document = json.loads(spec_checkpoint)
    return {
        "goal": document["goal"]["primary"],
        "tasks": document["goal"]["tasks"],
        "summary": document["summary"],
        "nextSteps": document["nextSteps"],
        "decisions": document["decisions"],
        "modifiedFiles": [{"path": "src/auth/session.ts", "note": "cookie options"}],
        "recentCommands": [
            {"command": "GITHUB_CLIENT_SECRET=gh_live_8f2a91 npm run dev", "exitCode": 0},
            {
                "command": "npm test -- auth",
                "exitCode": 1,
                "note": "2 failing in session.spec.ts: cookie missing after reload",
            },
        ],
    }


class SessionFactory(Protocol):
    def __call__(
        self,
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        mode: str = "legacy",
        roots: Sequence[str] | None = None,
        options: Sequence[str] = (),
        args: Sequence[str] = (),
        umask: int | None = None,
    ) -> AbstractAsyncContextManager[Client]: ...


@pytest.fixture
def session(hermetic_git: dict[str, str]) -> SessionFactory:
    """Start `python -m checkpoint_mcp session` as a real child process and connect the SDK client to it.

    ``roots`` makes the client declare the roots capability and answer roots/list with those URIs;
    ``options`` go to `checkpoint` before the `session` command (e.g. `--log-level debug`), ``args`` after it
    (e.g. `--journal J`); ``umask``: the server's umask (a shell sets it, then execs the server).
    """

    @asynccontextmanager
    async def connect(
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        mode: str = "legacy",
        roots: Sequence[str] | None = None,
        options: Sequence[str] = (),
        args: Sequence[str] = (),
        umask: int | None = None,
    ) -> AsyncIterator[Client]:
        command, *argv = with_umask(umask, [sys.executable, "-m", "checkpoint_mcp", *options, "session", *args])
        params = StdioServerParameters(
            command=command,
            args=argv,
            # The SDK passes on only a safe subset of our environment: PYTHONPATH too, so the server is this tree's.
            env={**hermetic_git, **_python_path(), **(env or {})},
            cwd=str(cwd),
        )
        callback = None
        if roots is not None:
            listed = [types.Root(uri=uri) for uri in roots]

            async def answer_roots(context: ClientRequestContext) -> types.ListRootsResult:
                return types.ListRootsResult(roots=listed)

            callback = answer_roots
        async with Client(params, mode=mode, list_roots_callback=callback) as client:
            yield client

    return connect


@pytest.fixture
def checkpoint_file() -> Callable[[Path], dict[str, Any]]:
    """Read and decode `<root>/.claude-checkpoint`."""

    def read(root: Path) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((root / ".claude-checkpoint").read_text())
        return document

    return read


def _python_path() -> dict[str, str]:
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
