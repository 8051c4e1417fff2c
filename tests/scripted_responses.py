"""A scripted model behind a small fake of the OpenAI Responses API, to drive the real Codex CLI headless.

Codex (``codex exec``) with a custom model provider (``wire_api = "responses"``) sends ``POST <base_url>/responses``
with ``"stream": true``; this server answers with the Server-Sent Events of the Responses API that Codex reads:
``response.created``, one ``response.output_item.added``/``response.output_item.done`` per output item (a
``function_call``, or the closing ``message``), then ``response.completed``. The "model" is a plan of tool calls
(``scripted_model.ToolCall``, the tool named as the server and the tool: ``mailbox`` / ``send_email``), made one
per turn, then a closing text; the function the model calls is the one Codex offered for that MCP tool.

Every request is kept (``requests``), so a test reads what the model was shown: the tool outputs
(``function_call_output``), and the instructions and input Codex sent.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_api import QuietHandler, loopback


@dataclass
class McpCall:
    """One turn of the plan: the model calls ``tool`` of the MCP server ``server`` with ``arguments``."""

    server: str
    tool: str
    arguments: dict[str, Any]


@dataclass
class ResponsesModel:
    """The plan, and every request Codex sent."""

    plan: list[McpCall]
    closing: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tag: str = field(default_factory=lambda: secrets.token_hex(4))

    def answer(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The output items of the next response: the next planned call (counted by this model's call ids among
        the conversation's items), or the closing message."""
        mine = f"call_{self.tag}_"
        items = request.get("input") or []
        done = sum(1 for item in items if item.get("type") == "function_call" and mine in str(item.get("call_id")))
        if done >= len(self.plan):
            return [_message(self.closing)]
        call = self.plan[done]
        function = offered(request.get("tools") or [], call.server, call.tool)
        return [
            {
                "type": "function_call",
                "id": f"fc_{self.tag}_{done}",
                "call_id": f"{mine}{done}",
                **function,
                "arguments": json.dumps(call.arguments),
            }
        ]

    def tool_outputs(self) -> list[str]:
        """Every ``function_call_output`` the last request carried, in order (what the tools answered)."""
        if not self.requests:
            return []
        items = self.requests[-1].get("input") or []
        return [_text(item.get("output")) for item in items if item.get("type") == "function_call_output"]


def _text(output: Any) -> str:
    """A tool output as text: Codex sends a string, or a list of ``input_text`` parts."""
    if isinstance(output, list):
        return "\n".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    return str(output)


def offered(tools: list[dict[str, Any]], server: str, tool: str) -> dict[str, Any]:
    """How Codex named the MCP tool ``server``/``tool`` among the request's tools: ``{"name": ...}``, with the
    ``namespace`` when Codex grouped the server's tools under one.

    Raises:
        AssertionError: Codex did not offer the tool (the server did not start, or was not trusted).
    """
    for entry in tools:
        if entry.get("type") == "namespace":
            for inner in entry.get("tools") or []:
                if inner.get("name") in (tool, f"mcp__{server}__{tool}") and server in str(entry.get("name")):
                    return {"name": inner["name"], "namespace": entry["name"]}
        elif entry.get("name") in (f"mcp__{server}__{tool}", f"{server}__{tool}"):
            return {"name": entry["name"]}
    names = [entry.get("name") for entry in tools]
    raise AssertionError(f"Codex did not offer {server}/{tool}; it offered {names}")


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{secrets.token_hex(4)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _events(items: list[dict[str, Any]], model: str) -> Iterator[dict[str, Any]]:
    response = {"id": f"resp_{secrets.token_hex(4)}", "object": "response", "model": model, "status": "in_progress"}
    yield {"type": "response.created", "response": response}
    for index, item in enumerate(items):
        yield {"type": "response.output_item.added", "output_index": index, "item": item}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 11,
    }
    yield {
        "type": "response.completed",
        "response": {**response, "status": "completed", "output": items, "usage": usage},
    }


def _handler(model: ResponsesModel) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith("/responses"):
                self.json(status=404, value={"error": {"message": f"no {self.path} here"}})
                return
            request = json.loads(body)
            with model.lock:
                model.requests.append(request)
                try:
                    items = model.answer(request)
                except AssertionError as exc:
                    items = [_message(f"scripted model: {exc}")]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for event in _events(items, request.get("model", "scripted")):
                self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()

        def do_GET(self) -> None:
            self.json(status=200, value={"object": "list", "data": []})

    return Handler


@contextmanager
def serving(model: ResponsesModel) -> Iterator[str]:
    """Serve ``model`` on a loopback port; yields the base URL for a Codex model provider (``.../v1``)."""
    with loopback(_handler(model)) as url:
        yield url + "/v1"
