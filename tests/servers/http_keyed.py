"""A payment service over Streamable HTTP that deduplicates on an HTTP header, as Stripe does with
``Idempotency-Key``: for tests of a tool policy's ``idempotency = { header = "NAME" }``.

Run as ``python http_keyed.py [--port N]``: it binds 127.0.0.1, prints ``PORT <n>`` on stdout, and answers
JSON-RPC POSTs on ``/mcp`` with ``application/json`` (no session). One tool, ``charge_card(customer, cents)``:
a charge whose ``KEY_HEADER`` (default ``Idempotency-Key``) was charged before charges nothing and answers as the
first one did. ``LEDGER`` names the file of charges (one line each, with the key); every tools/call request is
appended to ``REQUESTS`` as ``{"key": <header or null>, "body": <the request's bytes>}``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn

TOOL = {
    "name": "charge_card",
    "description": "Charge a customer's card, once per Idempotency-Key.",
    "inputSchema": {
        "type": "object",
        "properties": {"customer": {"type": "string"}, "cents": {"type": "integer"}},
        "required": ["customer", "cents"],
    },
}


def _append(env_var: str, line: str) -> None:
    with open(os.environ[env_var], "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _charge(arguments: dict[str, Any], key: str | None) -> str:
    answer = f"charged {arguments['customer']} {arguments['cents'] / 100:.2f} EUR"
    ledger = Path(os.environ["LEDGER"])
    charged = ledger.read_text().splitlines() if ledger.exists() else []
    if key is not None and any(line.endswith(f" key={key}") for line in charged):
        return answer
    _append("LEDGER", f"customer={arguments['customer']} cents={arguments['cents']} key={key}")
    return answer


def _result(message: dict[str, Any], key: str | None, body: bytes) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        version = message["params"].get("protocolVersion", "2025-06-18")
        result: Any = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "keyed-payments", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        _append("REQUESTS", json.dumps({"key": key, "body": body.decode()}))
        text = _charge(message["params"]["arguments"], key)
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    wanted = os.environ.get("KEY_HEADER", "Idempotency-Key").lower().encode()
    keys = [v.decode() for k, v in scope["headers"] if k == wanted]
    answer = _result(json.loads(body), keys[0] if keys else None, body)
    if answer is None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", options.port))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    sys.stdout.flush()
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
