"""Real HTTP MCP servers for tests, each a child process on a loopback port the kernel picked."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from support import SERVERS

START_TIMEOUT = 30.0


class HttpServer:
    """A server process that prints ``PORT <n>`` once it listens; ``url`` is its MCP endpoint."""

    def __init__(
        self, argv: list[str], *, env: dict[str, str] | None = None, path: str = "/mcp", scheme: str = "http"
    ) -> None:
        self._argv = argv
        self._scheme = scheme
        self._env = {**os.environ, **(env or {})}
        self._path = path
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        assert self.port is not None
        return f"{self._scheme}://127.0.0.1:{self.port}{self._path}"

    def start(self, port: int | None = None) -> HttpServer:
        """Start it (on ``port``, for a restart on the same address) and wait until it listens."""
        argv = [*self._argv, "--port", str(port)] if port is not None else self._argv
        proc = self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=self._env)
        lines: queue.Queue[bytes] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            with proc.stdout:  # closed at EOF, when the process is gone
                for line in proc.stdout:
                    lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # other lines may come first (a Node server's greeting)
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise AssertionError(f"{argv} did not say its port within {START_TIMEOUT}s") from None
            if line.startswith(b"PORT "):
                self.port = int(line.split()[1])
                break
        return self

    def stop(self) -> None:
        """Kill it (SIGKILL: a crash) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        """Kill it and start it again on the same port: every session it held is gone."""
        self.stop()
        self.start(self.port)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def sdk_server(tmp_path: Path, *flags: str) -> HttpServer:
    """The official-SDK test server (``servers/http_server.py``), its side effects in ``tmp_path/effects.jsonl``."""
    return HttpServer(
        [sys.executable, str(SERVERS / "http_server.py"), *flags],
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def faults_server(tmp_path: Path, *flags: str, scheme: str = "http") -> HttpServer:
    """The misbehaving test server (``servers/http_faults_server.py``); what it received in ``effects.jsonl``."""
    return HttpServer(
        [sys.executable, str(SERVERS / "http_faults_server.py"), *flags],
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
        scheme=scheme,
    )


def everything_server() -> HttpServer:
    """``@modelcontextprotocol/server-everything`` from npm (``.tools/npm``) in its streamable-HTTP mode, on Node 22;
    ``print_port.cjs`` reports the port the kernel gave its ``PORT=0``."""
    import nodetools

    script = nodetools.MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    argv = [str(nodetools.node22()), "--require", str(SERVERS / "print_port.cjs"), str(script), "streamableHttp"]
    return HttpServer(argv, env={"PORT": "0"})
