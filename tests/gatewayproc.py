"""Test harness for `checkpoint serve`: a real gateway process on a free loopback port, and raw HTTP to it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd, wait_until

ACCEPT_BOTH = "application/json, text/event-stream"


class GatewayProcess:
    """`checkpoint serve --listen 127.0.0.1:0 …`; ``url`` once it listens. Waits are bounded."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, listen: str = "127.0.0.1:0") -> None:
        self.proc = subprocess.Popen(
            checkpoint_argv("serve", "--listen", listen, *args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        self._pumper = threading.Thread(target=self._pump, daemon=True)
        self._pumper.start()
        self.url = ""
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while not self.url:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise TimeoutError(f"the gateway did not start listening; stderr:\n{self.stderr}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].strip()
            if line == "":
                raise RuntimeError(f"the gateway exited ({self.proc.wait()}); stderr:\n{self.stderr}")
        self.base = self.url.rsplit("/mcp", 1)[0]
        self.port = int(self.base.rsplit(":", 1)[1])

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            text = raw.decode(errors="replace")
            self._stderr.append(text)
            self._lines.put(text)
        self._lines.put("")

    @property
    def stderr(self) -> str:
        """Everything the gateway wrote to stderr so far."""
        return "".join(self._stderr)

    def terminate(self, timeout: float = DEFAULT_TIMEOUT) -> int:
        """SIGTERM, then wait for the exit code (and the end of its stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self._close()
        return code

    def kill(self) -> None:
        """SIGKILL (if still running) and reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=DEFAULT_TIMEOUT)
        self._close()

    def _close(self) -> None:
        self._pumper.join(timeout=DEFAULT_TIMEOUT)
        if self.proc.stderr is not None and not self._pumper.is_alive():
            self.proc.stderr.close()

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.terminate()
        self.kill()


def effects_gateway(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> GatewayProcess:
    """A gateway in front of the effects test server, its side effects counted in ``tmp_path/effects.jsonl``."""
    environment = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), **(env or {})}
    return GatewayProcess("--upstream-cmd", server_cmd("effects_server.py"), *extra, env=environment)


class Reply:
    """One HTTP response, read whole."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body as JSON; an SSE body as the list of its events' data."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            return [json.loads(data) for data in sse_data(self.body)]
        return json.loads(self.body)

    def message(self) -> Any:
        """The final JSON-RPC message, whether the body was JSON or an SSE stream."""
        value = self.json()
        return value[-1] if isinstance(value, list) else value


def sse_data(body: bytes) -> list[str]:
    """The ``data`` of each SSE event in ``body``."""
    out: list[str] = []
    for event in body.decode().split("\n\n"):
        data = [line[6:] for line in event.split("\n") if line.startswith("data: ")]
        if data:
            out.append("\n".join(data))
    return out


def request(
    port: int,
    method: str,
    path: str = "/mcp",
    body: bytes | dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Reply:
    """One raw HTTP request to the gateway (headers exactly as given, plus what http.client adds)."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = {"Content-Type": "application/json", "Accept": ACCEPT_BOTH} if method == "POST" else {}
    sent.update(headers or {})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


def initialize(
    port: int, path: str = "/mcp", version: str = "2025-06-18", headers: dict[str, str] | None = None
) -> str:
    """Open a session-era session; its ``Mcp-Session-Id``."""
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    reply = request(port, "POST", path, body, headers)
    assert reply.status == 200, reply.body
    return reply.headers["mcp-session-id"]


def modern_call(ident: Any, tool: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """A 2026-07-28 tools/call request."""
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", **meta},
        },
    }


MODERN = {"MCP-Protocol-Version": "2026-07-28"}


def pages_url(gateway: GatewayProcess, url_file: Path) -> str:
    """The journal's pages' URL, with its token, from the ``--ui-url-file`` the gateway was given (read once it has
    announced its pages on stderr, so never a file an earlier gateway left)."""
    wait_until(lambda: "the journal's pages at" in gateway.stderr, what="the gateway to announce its pages")
    return url_file.read_text(encoding="utf-8").strip()
