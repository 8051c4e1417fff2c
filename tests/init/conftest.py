"""Every `init` test runs with HOME (and XDG_DATA_HOME) in a temp folder and no CLAUDE_CONFIG_DIR, GEMINI_CLI_HOME
or CODEX_HOME: `init` reads and writes Claude Code's ``~/.claude.json`` and ``~/.claude/settings.json``, Gemini's
``~/.gemini/settings.json`` and Codex's ``~/.codex/config.toml``, and a test must never touch the real ones. ``sink``: a loopback webhook
receiver that counts what it gets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .webhook_sink import Sink


@pytest.fixture(autouse=True)
def temp_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home


@pytest.fixture
def sink() -> Iterator[Sink]:
    """A loopback HTTP server counting the requests it gets (a webhook's receiver), for the shell servers' tests."""
    with Sink() as running:
        yield running
