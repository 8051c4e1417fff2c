"""Secrets stay out of command lines: a wrapped HTTP entry's header reaches the server with the value the client's
variable holds, while the proxy's own command line (readable by every user in ``ps``) holds only references."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .entries import launch_argv, run_init

SECRET = "sk-live-'quoted' \"and\" $spaced"


class _Recorder(BaseHTTPRequestHandler):
    """Answers an MCP ``initialize`` POST with JSON and records the headers of every request."""

    seen: list[dict[str, str]]

    def do_POST(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in body:
            self.send_response(202)
            self.end_headers()
            return
        result = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rec", "version": "1"},
        }
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_header_secret_reaches_the_server_and_never_the_proxy_command_line(
    tmp_path: Path, recorder: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recorder
    config = {"mcpServers": {"pay": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${PAY_TOKEN}"}}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(config))
    assert run_init("--project", str(tmp_path)).returncode == 0
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["pay"]
    assert "PAY_TOKEN" not in json.dumps(entry["args"])

    argv, env = launch_argv(entry, {**os.environ, "PAY_TOKEN": SECRET})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode() + b"\n"
        )
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["serverInfo"]["name"] == "pay"  # init gives the proxy the entry's name
        command_line = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert SECRET.encode() not in command_line
        assert b"${CHECKPOINT_HEADER_AUTHORIZATION}" in command_line
    finally:
        proc.kill()
        proc.wait(20)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert seen[0]["authorization"] == f"Bearer {SECRET}"
