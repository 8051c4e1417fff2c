"""Fixtures of the operator's pages: a real `checkpoint journal ui` process, and a real browser."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext

from browser import chromium
from support import DEFAULT_TIMEOUT, checkpoint_argv

URL = re.compile(r"(http://\S+)")


class UiProcess:
    """`checkpoint journal ui` as a child process; ``url`` is the URL it printed (with its token)."""

    def __init__(self, journal: str, *extra: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            checkpoint_argv("journal", "ui", "--journal", journal, *extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            first = lines.get(timeout=DEFAULT_TIMEOUT)
        except queue.Empty:
            first = None
        found = URL.search(first or "")
        if found is None:
            self.stop()
            raise AssertionError(f"no URL from `checkpoint journal ui`: {first!r}; stderr:\n{self.stderr()}")
        self.printed = first or ""
        self.url = found.group(1)
        self.base = self.url.split("?", 1)[0]

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stop(self) -> int:
        """SIGTERM (uvicorn's graceful stop), then wait, bounded."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(DEFAULT_TIMEOUT)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code


@pytest.fixture
def ui_server() -> Iterator[Callable[..., UiProcess]]:
    """Start `checkpoint journal ui` processes; all are stopped at the end of the test."""
    started: list[UiProcess] = []

    def start(journal: str, *extra: str, env: dict[str, str] | None = None) -> UiProcess:
        process = UiProcess(journal, *extra, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[BrowserContext]:
    """The machine's chromium with a fresh profile."""
    with chromium(tmp_path / "profile") as context:
        context.set_default_timeout(DEFAULT_TIMEOUT * 1000)
        yield context
