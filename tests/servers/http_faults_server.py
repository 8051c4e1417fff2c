"""A hand-written MCP server over HTTP/1.1 that misbehaves on request, so tests control every byte and status.

Standard library only (asyncio streams). ``python http_faults_server.py [--legacy] [--port N]`` binds 127.0.0.1,
prints ``PORT <n>``, and serves ``/mcp``: Streamable HTTP with sessions (``Mcp-Session-Id: s<N>``), or with
``--legacy`` the 2024-11-05 HTTP+SSE transport (POST /mcp is 405; GET /mcp opens the event stream, whose
``endpoint`` event names ``/messages``); with ``--cert FILE``, HTTPS; with ``--require-authorization VALUE``, any
request whose ``Authorization`` is not exactly VALUE gets a 401 (and is recorded as ``unauthorized``). Every request it receives appends a line to ``EFFECTS_FILE``
(``{"event": "received", "method": ..., "tool": ..., "raw": <the body>, ...}``), and every side effect a ``done`` line.

Tools (``tools/call`` by name):
  send_email(to)       side effect, JSON answer "sent to <to>"
  drop()               opens an SSE stream, sends a progress notification, then drops the connection
  never()              reads the request and never answers
  status(code)         answers with HTTP ``code`` and a plain-text body
  rpc_error_500()      side effect, then HTTP 500 with a JSON-RPC error body (the server's own answer)
  forget(version, refuse)  forgets every session (a restart, as far as clients can tell), answers "forgot";
                       later initializes negotiate ``version`` if given, or are refused (HTTP 400) if ``refuse``
  resumable()          side effect, an SSE stream with a numbered priming event, dropped before the answer;
                       a GET with ``Last-Event-ID`` gets the answer
  announce()           pushes notifications/tools/list_changed on the GET stream, then answers "announced"
  start_task(order)    side effect, answers with a task handle (the tasks extension); ``tasks/get`` says it
                       completed, ``tasks/result`` gives "shipped <order>"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
from typing import Any

EFFECTS = os.environ.get("EFFECTS_FILE")
TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in (
        "send_email",
        "drop",
        "never",
        "status",
        "rpc_error_500",
        "forget",
        "resumable",
        "announce",
        "start_task",
    )
]
REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Not Allowed"}


def record(event: str, **fields: Any) -> None:
    if EFFECTS:
        with open(EFFECTS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, **fields}) + "\n")


class Server:
    def __init__(self, legacy: bool, authorization: str | None = None) -> None:
        self.legacy = legacy
        self.authorization = authorization
        self.sessions: set[str] = set()
        self.counter = 0
        self.listeners: list[asyncio.StreamWriter] = []
        self.parked: dict[str, bytes] = {}  # event id -> the answer a resuming GET gets
        self.legacy_stream: asyncio.StreamWriter | None = None
        self.tasks: dict[str, str] = {}  # task id -> order
        self.version = "2025-11-25"  # what initialize negotiates
        self.refuse_initialize = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                keep = await self.route(method, target, headers, body, writer)
                if not keep:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            if not writer.is_closing():
                writer.close()

    async def respond(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json", **extra: str
    ) -> bool:
        headers = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", f"content-type: {ctype}"]
        headers += [f"content-length: {len(body)}", *[f"{k.replace('_', '-')}: {v}" for k, v in extra.items()]]
        writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return True

    async def open_stream(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n")
        await writer.drain()

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if self.authorization is not None and headers.get("authorization") != self.authorization:
            record("unauthorized", method=method, auth=headers.get("authorization"))
            return await self.respond(writer, 401, b"unauthorized", "text/plain")
        if self.legacy:
            return await self.route_legacy(method, target, body, writer, headers.get("traceparent"))
        session = headers.get("mcp-session-id")
        if method == "GET":
            if session not in self.sessions:
                return await self.respond(writer, 404, b"unknown session", "text/plain")
            last = headers.get("last-event-id")
            record("listening", session=session, last_event_id=last)
            await self.open_stream(writer)
            if last is not None and last in self.parked:
                writer.write(b"id: " + last.encode() + b"-2\ndata: " + self.parked.pop(last) + b"\n\n")
                await writer.drain()
                writer.close()
                return False
            self.listeners.append(writer)
            await asyncio.Event().wait()  # held open until the client goes
            return False
        if method == "DELETE":
            self.sessions.discard(session or "")
            record("deleted", session=session)
            return await self.respond(writer, 200, b"")
        message = json.loads(body)
        tool = (message.get("params") or {}).get("name") if message.get("method") == "tools/call" else None
        record(
            "received",
            method=message.get("method"),
            tool=tool,
            session=session,
            auth=headers.get("authorization"),
            raw=body.decode(),
            mcp_method=headers.get("mcp-method"),
            mcp_name=headers.get("mcp-name"),
            version=headers.get("mcp-protocol-version"),
            traceparent=headers.get("traceparent"),
        )
        if message.get("method") == "initialize" and self.refuse_initialize:
            error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32600, "message": "not today"}}
            return await self.respond(writer, 400, json.dumps(error).encode())
        if message.get("method") == "initialize":
            self.counter += 1
            new = f"s{self.counter}"
            self.sessions.add(new)
            result = {
                "protocolVersion": self.version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "faults", "version": "1.0.0"},
            }
            return await self.respond(writer, 200, answer(message, result), mcp_session_id=new)
        stateless = headers.get("mcp-protocol-version") == "2026-07-28"  # no session in that era
        if session not in self.sessions and not stateless:
            return await self.respond(writer, 404, b"session expired", "text/plain")
        if "id" not in message or "method" not in message:
            return await self.respond(writer, 202, b"")
        if message["method"] == "tools/list":
            return await self.respond(writer, 200, answer(message, {"tools": TOOLS}))
        if message["method"] in ("tasks/get", "tasks/result"):
            task_id = message["params"]["taskId"]
            if message["method"] == "tasks/get":
                return await self.respond(writer, 200, answer(message, task(task_id, "completed")))
            return await self.respond(writer, 200, answer(message, text(f"shipped {self.tasks[task_id]}")))
        if message["method"] != "tools/call":
            return await self.respond(writer, 200, answer(message, {}))
        return await self.call(message, tool, writer)

    async def call(self, message: dict[str, Any], tool: str | None, writer: asyncio.StreamWriter) -> bool:
        arguments = message["params"].get("arguments") or {}
        if tool == "send_email":
            record("done", tool=tool)
            return await self.respond(writer, 200, answer(message, text(f"sent to {arguments.get('to')}")))
        if tool == "drop":
            record("started", tool=tool)
            await self.open_stream(writer)
            progress = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            }
            writer.write(b"data: " + json.dumps(progress).encode() + b"\n\n")
            await writer.drain()
            writer.transport.abort()
            return False
        if tool == "never":
            record("started", tool=tool)
            await asyncio.Event().wait()
        if tool == "status":
            return await self.respond(writer, int(arguments["code"]), b"no", "text/plain")
        if tool == "rpc_error_500":
            record("done", tool=tool)
            error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32000, "message": "it broke"}}
            return await self.respond(writer, 500, json.dumps(error).encode())
        if tool == "forget":
            self.sessions.clear()
            self.version = str(arguments.get("version", self.version))
            self.refuse_initialize = bool(arguments.get("refuse", False))
            for listener in self.listeners:
                listener.transport.abort()
            self.listeners.clear()
            return await self.respond(writer, 200, answer(message, text("forgot")))
        if tool == "resumable":
            record("done", tool=tool)
            self.counter += 1
            event = f"e{self.counter}"
            self.parked[event] = answer(message, text("resumed answer"))
            await self.open_stream(writer)
            writer.write(b"id: " + event.encode() + b"\nretry: 50\ndata:\n\n")
            await writer.drain()
            writer.transport.abort()
            return False
        if tool == "start_task":
            record("done", tool=tool)
            self.counter += 1
            task_id = f"task-{self.counter}"
            self.tasks[task_id] = str(arguments.get("order"))
            return await self.respond(writer, 200, answer(message, {"task": task(task_id, "working")["task"]}))
        if tool == "announce":
            note = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
            for listener in self.listeners:
                listener.write(b"data: " + note + b"\n\n")
                await listener.drain()
            return await self.respond(writer, 200, answer(message, text("announced")))
        return await self.respond(writer, 200, answer(message, text("?")))

    async def route_legacy(
        self, method: str, target: str, body: bytes, writer: asyncio.StreamWriter, traceparent: str | None = None
    ) -> bool:
        if target.startswith("/mcp"):
            if method != "GET":
                record("received", method="POST /mcp", tool=None, session=None)
                return await self.respond(writer, 405, b"use GET for the event stream", "text/plain")
            await self.open_stream(writer)
            writer.write(b"event: endpoint\ndata: /messages?session_id=1\n\n")
            await writer.drain()
            self.legacy_stream = writer
            await asyncio.Event().wait()
        message = json.loads(body)
        tool = (message.get("params") or {}).get("name") if message.get("method") == "tools/call" else None
        record("received", method=message.get("method"), tool=tool, session="legacy", traceparent=traceparent)
        await self.respond(writer, 202, b"")
        if "id" in message and "method" in message and self.legacy_stream is not None:
            if message["method"] == "initialize":
                reply = answer(
                    message,
                    {
                        "protocolVersion": "2024-11-05",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "legacy-faults", "version": "0.9"},
                    },
                )
            elif message["method"] == "tools/list":
                reply = answer(message, {"tools": TOOLS})
            elif tool == "send_email":
                record("done", tool=tool)
                reply = answer(message, text(f"sent to {message['params']['arguments'].get('to')}"))
            elif tool == "drop":
                record("started", tool=tool)
                self.legacy_stream.transport.abort()
                self.legacy_stream = None
                return True
            else:
                reply = answer(message, {})
            self.legacy_stream.write(b"event: message\ndata: " + reply + b"\n\n")
            await self.legacy_stream.drain()
        return True


def answer(message: dict[str, Any], result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()


def task(task_id: str, status: str) -> dict[str, Any]:
    return {"task": {"taskId": task_id, "status": status, "createdAt": "2026-12-01T00:00:00Z", "ttl": 60000}}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert", help="serve HTTPS with this PEM file (certificate chain and private key)")
    parser.add_argument("--require-authorization", metavar="VALUE", help="refuse (401) a request without it")
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    server = Server(options.legacy, options.require_authorization)
    context = None
    if options.cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(options.cert)
    listening = await asyncio.start_server(server.handle, sock=sock, ssl=context)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    async with listening:
        await listening.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
