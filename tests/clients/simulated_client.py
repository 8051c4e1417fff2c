"""A client process, as FACTS.md describes the clients `init` supports: it runs its hooks through ``/bin/sh -c`` as
its own children and starts its stdio servers as its own children (the official MCP SDK client over stdio), so the
process tree around the proxies is a real client's. The test drives it over its stdin and stdout, one JSON line per
command and per answer:

* ``{"op": "hook", "command": "...", "input": {...}}``: run one hook, its input on stdin; answers its exit code and
  stdout;
* ``{"op": "start", "servers": {"name": {"command", "args", "env"}}, "cwd": "..."}``: start every server (initialize
  and list its tools); answers each one's tools, or why it did not start;
* ``{"op": "call", "server": "...", "tool": "...", "arguments": {...}}``: one tools/call; answers its text and
  whether it was a tool error, or the JSON-RPC error's code, message and data;
* ``{"op": "exit"}``: close every server and exit.

What a client does with these (which hooks run when, which servers a chat shares) is the test's to say: this
process is only the process tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError


def answer(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def hook(command: str, payload: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr[-2000:]}


async def start(stack: AsyncExitStack, servers: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    started: dict[str, Any] = {}
    sessions: dict[str, ClientSession] = {}
    for name, entry in servers.items():
        params = StdioServerParameters(
            command=entry["command"],
            args=entry.get("args", []),
            env={**os.environ, **entry.get("env", {})},
            cwd=cwd,
        )
        try:
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(90):
                await session.initialize()
                tools = await session.list_tools()
        except Exception as exc:  # the test asserts every server started; this says why one did not
            started[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        sessions[name] = session
        started[name] = {"tools": [tool.name for tool in tools.tools]}
    return {"servers": started, "sessions": sessions}


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        with anyio.fail_after(120):
            result = await session.call_tool(tool, arguments)
    except MCPError as exc:
        return {"code": exc.error.code, "message": exc.error.message, "data": exc.error.data}
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return {"text": text, "isError": bool(result.is_error)}


async def main() -> None:
    sessions: dict[str, ClientSession] = {}
    async with AsyncExitStack() as stack:
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                return
            command = json.loads(line)
            op = command["op"]
            if op == "exit":
                answer({"ok": True})
                return
            if op == "hook":
                answer(await anyio.to_thread.run_sync(hook, command["command"], command["input"], command.get("cwd")))
            elif op == "start":
                started = await start(stack, command["servers"], command.get("cwd"))
                sessions.update(started["sessions"])
                answer({"servers": started["servers"], "pid": os.getpid()})
            elif op == "call":
                answer(await call(sessions[command["server"]], command["tool"], command.get("arguments", {})))
            else:
                answer({"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    anyio.run(main)
