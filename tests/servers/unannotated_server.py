"""A raw MCP stdio server whose tools carry no annotations at all, as many servers ship (the npm GitHub server's
26 tools): its reads say what they are only by their names. Its world is a folder (``DESK_DIR``) a test changes
between calls, so a read that answers afresh is told from a stale one.

Tools (no hints on any):
  get_status()            "status: <DESK_DIR/status.txt>; <n> ticket(s)"
  list_items()            the lines of DESK_DIR/items.txt
  search_docs(query)      the names of the files in DESK_DIR/docs/ whose text holds the query
  create_ticket(title)    side effect: appends the ticket to DESK_DIR/tickets.jsonl (fsynced before the answer)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

DESK = Path(os.environ.get("DESK_DIR", "."))

TOOLS: list[dict[str, Any]] = [
    {"name": "get_status", "description": "The desk's status.", "inputSchema": {"type": "object"}},
    {"name": "list_items", "description": "The items on the desk.", "inputSchema": {"type": "object"}},
    {
        "name": "search_docs",
        "description": "Documents that mention a word.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
    {
        "name": "create_ticket",
        "description": "Open a ticket.",
        "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    },
]


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def tickets() -> list[str]:
    return [json.loads(line)["title"] for line in read(DESK / "tickets.jsonl").splitlines()]


def answer(name: str, args: dict[str, Any]) -> str:
    if name == "get_status":
        return f"status: {read(DESK / 'status.txt').strip() or 'unknown'}; {len(tickets())} ticket(s)"
    if name == "list_items":
        return "items: " + ", ".join(read(DESK / "items.txt").split())
    if name == "search_docs":
        docs = DESK / "docs"
        found = sorted(p.name for p in docs.iterdir() if str(args.get("query")) in read(p)) if docs.exists() else []
        return "found: " + ", ".join(found)
    with (DESK / "tickets.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"title": args.get("title")}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return f"ticket #{len(tickets())} opened: {args.get('title')}"


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else None
        if not isinstance(message, dict) or message.get("id") is None or "method" not in message:
            continue
        ident, method, params = message["id"], message["method"], message.get("params") or {}
        if method == "initialize":
            version = params.get("protocolVersion", "2025-11-25")
            info = {"name": "desk", "version": "1.0.0"}
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") in {tool["name"] for tool in TOOLS}:
            text = answer(params["name"], params.get("arguments") or {})
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "tools/call":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32602, "message": f"unknown tool {params.get('name')}"},
                }
            )
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
