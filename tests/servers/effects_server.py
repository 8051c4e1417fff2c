"""A raw MCP stdio server whose tools have visible, countable side effects.

It speaks JSON-RPC by hand (no SDK) so tests control every byte. With ``EFFECTS_INTEGER_IDS=1`` it answers a
numeric id as an integer, as servers written in JavaScript do (``1.0`` comes back as ``1``). With
``EFFECTS_FINISH_ON_EOF=1`` it finishes the calls in flight when its stdin closes, as a graceful server does.
With ``EFFECTS_SERVER_INFO_META=1`` every result names the server in ``_meta``, as 2026-07-28 servers may. Each executed tool call appends one JSON line
to the file named by ``EFFECTS_FILE`` *before* answering, so a test can count exactly how many times the
upstream ran each call, whatever happened to the proxy in between.

Tools:
  send_email(to, subject)   side effect, answers "sent to <to>"
  send_quiet(...)           side effect, answers "ok" (echoes nothing of its arguments)
  slow(seconds, label)      records "started" at once, sleeps, then the side effect
  fail(reason)              side effect, then a JSON-RPC error (-32000)
  fail_quiet(...)           side effect, then a JSON-RPC error that echoes nothing
  tool_error(reason)        side effect, then a result with isError: true
  lookup(key)               readOnlyHint: true; records a "read" event (never "done")
  hang()                    records "started", never answers
  gate(path)                records "started", waits (up to 30 s) until the file ``path`` exists, records "done",
                            answers, then records "answered": a test holds the call exactly as long as it likes
  die(code)                 records "started", exits the process at once
  close_stdout()            records "started", closes its stdout and keeps running
  bad_utf8()                side effect, a result whose text holds bytes that are not UTF-8
  odd_numbers()             a result with odd number spellings, written as raw text
  big(size)                 a result with a text of ``size`` bytes
  echo_meta()               echoes the request's params as text
  notify_later(seconds, text)  answers at once, then sends a notifications/message with ``text`` (no request)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

EFFECTS = os.environ.get("EFFECTS_FILE")
INTEGER_IDS = os.environ.get("EFFECTS_INTEGER_IDS") == "1"
FINISH_ON_EOF = os.environ.get("EFFECTS_FINISH_ON_EOF") == "1"
SERVER_INFO_META = os.environ.get("EFFECTS_SERVER_INFO_META") == "1"
_out_lock = threading.Lock()
_effects_lock = threading.Lock()

TOOLS: list[dict[str, Any]] = [
    {"name": "send_email", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": True}},
    {"name": "send_quiet", "inputSchema": {"type": "object"}},
    {"name": "fail_quiet", "inputSchema": {"type": "object"}},
    {"name": "slow", "inputSchema": {"type": "object"}},
    {"name": "fail", "inputSchema": {"type": "object"}},
    {"name": "tool_error", "inputSchema": {"type": "object"}},
    {"name": "lookup", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "hang", "inputSchema": {"type": "object"}},
    {"name": "notify_later", "inputSchema": {"type": "object"}},
    {"name": "die", "inputSchema": {"type": "object"}},
    {"name": "close_stdout", "inputSchema": {"type": "object"}},
    {"name": "bad_utf8", "inputSchema": {"type": "object"}},
    {"name": "odd_numbers", "inputSchema": {"type": "object"}},
    {"name": "big", "inputSchema": {"type": "object"}},
    {"name": "echo_meta", "inputSchema": {"type": "object"}},
]


def send_raw(text: str) -> None:
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def send(obj: dict[str, Any]) -> None:
    if SERVER_INFO_META and isinstance(obj.get("result"), dict):
        meta = obj["result"].setdefault("_meta", {})
        meta["io.modelcontextprotocol/serverInfo"] = {"name": "effects", "version": "1.2.3"}
    send_raw(json.dumps(obj, separators=(",", ":")))


def record(event: str, name: str, arguments: Any) -> None:
    if EFFECTS:
        with _effects_lock, open(EFFECTS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"event": event, "tool": name, "arguments": arguments, "pid": os.getpid()}) + "\n")
            f.flush()
            os.fsync(f.fileno())


def text_result(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def call_tool(ident: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "send_email":
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result(f"sent to {args.get('to')}")})
    elif name == "send_quiet":
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result("ok")})
    elif name == "fail_quiet":
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": "failed"}})
    elif name == "slow":
        record("started", name, args)
        time.sleep(float(args.get("seconds", 1)))
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result(f"slow {args.get('label', '')} done")})
    elif name == "fail":
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32000, "message": f"failed: {args.get('reason')}"}})
    elif name == "tool_error":
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result(f"tool error: {args.get('reason')}", True)})
    elif name == "lookup":
        record("read", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result(f"value of {args.get('key')}")})
    elif name == "hang":
        record("started", name, args)
    elif name == "gate":
        record("started", name, args)
        deadline = time.monotonic() + 30.0
        while not os.path.exists(str(args.get("path"))) and time.monotonic() < deadline:
            time.sleep(0.005)
        record("done", name, args)
        send({"jsonrpc": "2.0", "id": ident, "result": text_result("gate passed")})
        record("answered", name, args)
    elif name == "die":
        record("started", name, args)
        os._exit(int(args.get("code", 3)))
    elif name == "bad_utf8":
        record("done", name, args)
        head = '{"jsonrpc":"2.0","id":' + json.dumps(ident) + ',"result":{"content":[{"type":"text","text":"caf'
        with _out_lock:
            sys.stdout.buffer.write(head.encode() + b'\xe9 \xff"}],"isError":false}}\n')
            sys.stdout.flush()
    elif name == "close_stdout":
        record("started", name, args)
        with _out_lock:
            os.close(1)  # and never answer: the process lives on without a way to speak
    elif name == "odd_numbers":
        record("done", name, args)
        send_raw(
            '{"jsonrpc":"2.0","id":' + json.dumps(ident) + ',"result":{"content":[{"type":"text","text":"n"}],'
            '"structuredContent":{"a":1.0,"b":1E+2,"c":-0,"d":12345678901234567890123},"isError":false,"x-vendor":true}}'
        )
    elif name == "big":
        record("done", name, {"size": args.get("size")})
        send({"jsonrpc": "2.0", "id": ident, "result": text_result("x" * int(args.get("size", 0)))})
    elif name == "notify_later":
        send({"jsonrpc": "2.0", "id": ident, "result": text_result("later")})
        time.sleep(float(args.get("seconds", 0.2)))
        send(
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": args.get("text")}}
        )
    elif name == "echo_meta":
        send({"jsonrpc": "2.0", "id": ident, "result": text_result(json.dumps(params, sort_keys=True))})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    ident = message.get("id")
    if INTEGER_IDS and isinstance(ident, float) and ident.is_integer():
        ident = int(ident)
    if method is None or ident is None:
        return  # responses and notifications need no answer
    if method == "initialize":
        result = {
            "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "effects", "version": "1.2.3", "title": "Effects test server"},
        }
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "server/discover":
        result = {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}},
            "cacheScope": "private",
            "ttlMs": 0,
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "effects", "version": "1.2.3"}},
        }
        send({"jsonrpc": "2.0", "id": ident, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        threading.Thread(target=call_tool, args=(ident, message.get("params") or {}), daemon=not FINISH_ON_EOF).start()
    elif method.startswith("silent/"):
        pass  # dropped without an answer, as a server with strict schemas drops a request it rejects
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"method not found: {method}"}})


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if isinstance(message, dict):
            handle(message)


if __name__ == "__main__":
    main()
