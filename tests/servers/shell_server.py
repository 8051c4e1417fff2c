"""A raw MCP stdio server with one tool that runs a shell command, unknown to `checkpoint init` (no reviewed
profile, no hints), as the many small shell servers people write are: `init` guesses from its name and its
``command`` argument that it runs shell commands (issue 43).

Tools (no hints):
  execute_command(command)   runs ``sh -c COMMAND`` in SHELL_DIR and answers its output and exit status
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "name": "execute_command",
        "description": "Run a shell command and return its output.",
        "inputSchema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }
]


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def run(command: str) -> dict[str, Any]:
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=os.environ.get("SHELL_DIR", "."),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    text = f"exit {done.returncode}\n{done.stdout}{done.stderr}"
    return {"content": [{"type": "text", "text": text}], "isError": done.returncode != 0}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else None
        if not isinstance(message, dict) or message.get("id") is None or "method" not in message:
            continue
        ident, method, params = message["id"], message["method"], message.get("params") or {}
        if method == "initialize":
            version = params.get("protocolVersion", "2025-11-25")
            info = {"name": "little-shell", "version": "0.1.0"}
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") == "execute_command":
            command = (params.get("arguments") or {}).get("command")
            send({"jsonrpc": "2.0", "id": ident, "result": run(str(command))})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
