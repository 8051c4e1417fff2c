"""A raw MCP stdio server whose side effects are kept in a ledger, for tests of in-doubt calls settled by policy.

Every effect is appended (under an exclusive lock, fsynced) to ``LEDGER_DIR/ledger.jsonl`` *before* the answer
is written, so a test compares the journal's settlements with what the upstream really did, however the proxy
died. With ``LEDGER_DELAY_MS=N`` each side effect waits a random 0..N ms before and after it happens, so a kill
lands before it as often as after it. With ``LEDGER_PROBE_GATE=PATH``, list_outbox creates ``PATH.asked``, waits
(up to 30 s) until ``PATH`` exists, answers, then creates ``PATH.answered``: a test holds a probe as long as it
likes.

Tools:
  send_email(to, subject)                 side effect; no key
  list_outbox(to, subject)                readOnlyHint: structuredContent {"count": mails sent with both}
  charge_card(customer, cents, idempotency_key)  side effect deduplicated on the key (a repeat returns the
                                          stored result and records a "dedup" line, no charge)
  probe_error(...)                        readOnlyHint: a JSON-RPC error
  probe_hang(...)                         readOnlyHint: never answers
  probe_odd(...)                          readOnlyHint: structuredContent {"count": "many"} (no matcher fits)
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

LEDGER = Path(os.environ.get("LEDGER_DIR", ".")) / "ledger.jsonl"
DELAY_MS = int(os.environ.get("LEDGER_DELAY_MS", "0"))
PROBE_GATE = os.environ.get("LEDGER_PROBE_GATE")
_out_lock = threading.Lock()

READ_ONLY = {"readOnlyHint": True}
TOOLS: list[dict[str, Any]] = [
    {"name": "send_email", "inputSchema": {"type": "object"}},
    {"name": "charge_card", "inputSchema": {"type": "object"}},
    {"name": "list_outbox", "inputSchema": {"type": "object"}, "annotations": READ_ONLY},
    {"name": "probe_error", "inputSchema": {"type": "object"}, "annotations": READ_ONLY},
    {"name": "probe_hang", "inputSchema": {"type": "object"}, "annotations": READ_ONLY},
    {"name": "probe_odd", "inputSchema": {"type": "object"}, "annotations": READ_ONLY},
]


def send(obj: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def entries() -> list[dict[str, Any]]:
    if not LEDGER.exists():
        return []
    return [json.loads(line) for line in LEDGER.read_text().splitlines() if line.strip()]


def _pause() -> None:
    if DELAY_MS:
        time.sleep(random.uniform(0, DELAY_MS) / 1000)


def effect(entry: dict[str, Any], key: str | None = None) -> dict[str, Any] | None:
    """Append ``entry`` unless ``key`` was already charged; the earlier entry if it was."""
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    with open(LEDGER.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        earlier = next((e for e in entries() if key is not None and e.get("key") == key and e["event"] == "done"), None)
        with LEDGER.open("a", encoding="utf-8") as f:
            line = {**entry, "event": "dedup" if earlier else "done", "pid": os.getpid()}
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
    return earlier


def text(value: str, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def call_tool(ident: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "send_email":
        _pause()
        effect({"tool": name, "to": args.get("to"), "subject": args.get("subject")})
        _pause()
        send({"jsonrpc": "2.0", "id": ident, "result": text(f"sent {args.get('subject')!r} to {args.get('to')}")})
    elif name == "charge_card":
        key = args.get("idempotency_key")
        _pause()
        earlier = effect({"tool": name, "customer": args.get("customer"), "cents": args.get("cents"), "key": key}, key)
        _pause()
        charge = earlier or {"customer": args.get("customer"), "cents": args.get("cents")}
        send({"jsonrpc": "2.0", "id": ident, "result": text(f"charged {charge['customer']} {charge['cents']} cents")})
    elif name == "list_outbox":
        if PROBE_GATE:
            Path(PROBE_GATE + ".asked").touch()
            deadline = time.monotonic() + 30.0
            while not os.path.exists(PROBE_GATE) and time.monotonic() < deadline:
                time.sleep(0.005)
        count = sum(
            1
            for e in entries()
            if e["tool"] == "send_email" and e["to"] == args.get("to") and e["subject"] == args.get("subject")
        )
        send({"jsonrpc": "2.0", "id": ident, "result": text(f"{count} mail(s)", {"count": count})})
        if PROBE_GATE:
            Path(PROBE_GATE + ".answered").touch()
    elif name == "probe_error":
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": "the outbox is unavailable"}})
    elif name == "probe_hang":
        pass
    elif name == "probe_odd":
        send({"jsonrpc": "2.0", "id": ident, "result": text("many", {"count": "many"})})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    ident = message.get("id")
    if method is None or ident is None:
        return
    if method == "initialize":
        result = {
            "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "ledger", "version": "1.0.0"},
        }
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        threading.Thread(target=call_tool, args=(ident, message.get("params") or {}), daemon=True).start()
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            message = json.loads(line)
            if isinstance(message, dict):
                handle(message)


if __name__ == "__main__":
    main()
