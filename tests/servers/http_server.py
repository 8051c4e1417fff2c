"""An official-SDK MCP server over Streamable HTTP, with counted side effects and server-to-client traffic.

Run as ``python http_server.py [--stateless] [--json] [--port N]``: it binds 127.0.0.1 (port 0 by default:
the kernel picks one), prints ``PORT <n>`` on stdout, and serves ``/mcp`` with uvicorn. The SDK serves both
protocol eras on that endpoint (2026-07-28 requests are routed by their ``MCP-Protocol-Version`` header).

Each executed side effect appends one JSON line to ``EFFECTS_FILE`` before the tool answers.

Tools:
  send_email(to, subject)   side effect, answers "sent to <to>"
  slow(seconds, label)      records "started", sleeps, records the side effect
  hang()                    records "started", never answers
  progress(steps)           progress and log notifications on the request's stream, then "did <steps> steps"
  confirm_gift(to)          asks the user (elicitation, or input_required in 2026-07-28), then the side effect
  ask_model(question)       asks the client's model (sampling; handshake era only)
  list_client_roots()       asks the client for its roots (handshake era only)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Annotated

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from pydantic import BaseModel

app = MCPServer("http-effects", version="3.1.0")


def record(event: str, tool: str, arguments: dict[str, object]) -> None:
    path = os.environ.get("EFFECTS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "tool": tool, "arguments": arguments, "pid": os.getpid()}) + "\n")
            f.flush()
            os.fsync(f.fileno())


@app.tool()
def send_email(to: str, subject: str = "") -> str:
    """Send an e-mail (a counted side effect)."""
    record("done", "send_email", {"to": to, "subject": subject})
    return f"sent to {to}"


@app.tool()
async def slow(seconds: float, label: str = "") -> str:
    """A side effect that takes a while."""
    record("started", "slow", {"seconds": seconds, "label": label})
    await anyio.sleep(seconds)
    record("done", "slow", {"seconds": seconds, "label": label})
    return f"slow {label} done"


@app.tool()
async def hang() -> str:
    """Starts and never answers."""
    record("started", "hang", {})
    await anyio.sleep_forever()
    return "unreachable"


@app.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports progress and logs each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
        await ctx.info(f"step {step} of {steps}")
    return f"did {steps} steps"


class Confirm(BaseModel):
    ok: bool


def ask(to: str) -> Elicit[Confirm]:
    return Elicit(f"Send a gift to {to}?", Confirm)


@app.tool()
def confirm_gift(to: str, confirm: Annotated[Confirm, Resolve(ask)]) -> str:
    """Send a gift after the user confirms."""
    if not confirm.ok:
        return "not sent"
    record("done", "confirm_gift", {"to": to})
    return f"gift sent to {to}"


@app.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Ask the client's model (sampling)."""
    reply = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))], max_tokens=20
    )
    content = reply.content
    return f"model said: {content.text if isinstance(content, types.TextContent) else content}"


@app.tool()
async def list_client_roots(ctx: Context) -> str:
    """Ask the client for its roots."""
    roots = await ctx.session.list_roots()
    return ", ".join(str(root.uri) for root in roots.roots)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(128)
    asgi = app.streamable_http_app(json_response=options.json, stateless_http=options.stateless)
    config = uvicorn.Config(asgi, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    sys.stdout.flush()
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
