"""A raw MCP stdio mail server for the end-to-end tests with real agent CLIs: every e-mail it sends is a line in
``MAILBOX_DIR/sent.jsonl`` (fsynced before the answer), so a test counts the real side effects.

Tools (described as a real server would: argument names in the schema, hints where they hold):
  send_email(to, subject, body)   side effect, no hints (so: destructive, not idempotent)
  list_outbox(to, subject)        readOnlyHint: how many mails were sent with both

With ``MAILBOX_HOLD=PATH``, ``send_email`` records the mail and then waits until PATH exists before it answers: a
test kills the client while the call is in flight, after the mail went out. With ``MAILBOX_FAIL=PATH``, while PATH
exists ``send_email`` sends nothing and reports the failure as a tool error (``isError: true``, "SMTP 451 try
again later: nothing was sent"), as a mail server that is briefly unavailable does. With
``MAILBOX_START_DELAY=SECONDS`` it reads nothing for that long after it starts, as a server slow to start does.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

SENT = Path(os.environ.get("MAILBOX_DIR", ".")) / "sent.jsonl"
HOLD = os.environ.get("MAILBOX_HOLD")
FAIL = os.environ.get("MAILBOX_FAIL")
_out = threading.Lock()

TOOLS: list[dict[str, Any]] = [
    {
        "name": "send_email",
        "description": "Send an e-mail.",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "subject", "body"],
        },
    },
    {
        "name": "list_outbox",
        "description": "Count the e-mails sent to someone with a subject.",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["to", "subject"],
        },
        "annotations": {"readOnlyHint": True},
    },
]


def send(obj: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def sent() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SENT.read_text().splitlines()] if SENT.exists() else []


def text(ident: Any, value: str, structured: dict[str, Any] | None = None) -> None:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    send({"jsonrpc": "2.0", "id": ident, "result": result})


def call_tool(ident: Any, params: dict[str, Any]) -> None:
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "send_email" and FAIL and os.path.exists(FAIL):
        result = {"content": [{"type": "text", "text": "SMTP 451 try again later: nothing was sent"}], "isError": True}
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    elif name == "send_email":
        SENT.parent.mkdir(parents=True, exist_ok=True)
        with SENT.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"to": args.get("to"), "subject": args.get("subject"), "body": args.get("body")}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        while HOLD and not os.path.exists(HOLD):
            time.sleep(0.02)
        text(ident, f"sent {args.get('subject')!r} to {args.get('to')}")
    elif name == "list_outbox":
        count = sum(1 for m in sent() if m["to"] == args.get("to") and m["subject"] == args.get("subject"))
        text(ident, f"{count} mail(s)", {"count": count})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def main() -> None:
    time.sleep(float(os.environ.get("MAILBOX_START_DELAY", "0")))
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else None
        if not isinstance(message, dict) or message.get("id") is None or "method" not in message:
            continue
        ident, method = message["id"], message["method"]
        if method == "initialize":
            version = (message.get("params") or {}).get("protocolVersion", "2025-11-25")
            info = {"name": "mailbox", "version": "1.0.0"}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=call_tool, args=(ident, message.get("params") or {}), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
