"""A scripted model behind a small fake of the Anthropic Messages API, to drive the real Claude Code CLI headless.

Claude Code (``claude -p``) talks to ``ANTHROPIC_BASE_URL`` with ``POST /v1/messages?beta=true`` and
``"stream": true``; this server answers with the Server-Sent Events of the Messages API. The "model" is a plan:
a list of tool calls made one per turn, then a closing text. Claude Code defers MCP tools, so a call of
``mcp__<server>__<tool>`` is preceded by a ``ToolSearch`` for ``select:`` that tool, as a real model would.

Every request is kept (``requests``), so a test reads what the model was shown: the SessionStart hook's
``additionalContext``, the tool results (an error's ``error.message`` is all Claude Code hands over).
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
class ToolCall:
    """One turn of the plan: the model calls ``name`` (``mcp__server__tool`` or a built-in) with ``arguments``;
    ``after``: the model makes it only once the event is set (a test holds a session there)."""

    name: str
    arguments: dict[str, Any]
    after: threading.Event | None = None


@dataclass
class ScriptedModel:
    """The plan, and every request Claude Code sent."""

    plan: list[ToolCall]
    closing: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tag: str = field(default_factory=lambda: secrets.token_hex(4))  # in the ids of this model's tool calls

    def turns(self) -> list[ToolCall]:
        """The plan as the model makes it: each MCP tool selected with ToolSearch the first time it is called."""
        turns: list[ToolCall] = []
        selected: set[str] = set()
        for call in self.plan:
            if call.name.startswith("mcp__") and call.name not in selected:
                selected.add(call.name)
                turns.append(ToolCall("ToolSearch", {"query": f"select:{call.name}", "max_results": 1}))
            turns.append(call)
        return turns

    def answer(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The content blocks of the next assistant message, from how many of this model's own tool calls the
        conversation holds (a resumed conversation carries an earlier session's calls, and Claude Code may drop an
        interrupted one, so they are told apart by the id this model gave them)."""
        if not request.get("tools"):
            return [{"type": "text", "text": "ok"}]  # a side request (a title, a summary): not part of the plan
        done = self._done(request)
        turns = self.turns()
        if done < len(turns):
            turn = turns[done]
            mine = f"toolu_{self.tag}_"
            return [{"type": "tool_use", "id": f"{mine}{done:04d}", "name": turn.name, "input": turn.arguments}]
        return [{"type": "text", "text": self.closing}]

    def _done(self, request: dict[str, Any]) -> int:
        """How many of this model's own tool calls the conversation holds."""
        mine = f"toolu_{self.tag}_"
        return sum(
            1
            for message in request.get("messages", [])
            if message.get("role") == "assistant"
            for block in (message.get("content") if isinstance(message.get("content"), list) else [])
            if isinstance(block, dict) and block.get("type") == "tool_use" and str(block.get("id")).startswith(mine)
        )

    def turn_of(self, request: dict[str, Any]) -> ToolCall | None:
        """The turn a request of the plan is answered with (None: the closing text, or a side request)."""
        if not request.get("tools"):
            return None
        done = self._done(request)
        turns = self.turns()
        return turns[done] if done < len(turns) else None

    def texts(self) -> list[str]:
        """Every text the model was shown (system prompts, user and tool-result text), request by request."""
        return [json.dumps(request) for request in self.requests]

    def tool_results(self) -> list[str]:
        """The text of every tool result in the last request, in order (what the model saw of each call)."""
        if not self.requests:
            return []
        results = []
        for message in self.requests[-1].get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    if isinstance(inner, list):
                        inner = "".join(part.get("text", "") for part in inner if isinstance(part, dict))
                    results.append(("ERROR: " if block.get("is_error") else "") + str(inner))
        return results


def _events(blocks: list[dict[str, Any]], model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 10, "output_tokens": 1}
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_scripted",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        },
    )
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = "tool_use" if any(block["type"] == "tool_use" for block in blocks) else "end_turn"
    yield (
        "message_delta",
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}},
    )
    yield "message_stop", {"type": "message_stop"}


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
                self.json({"input_tokens": 10} if "count_tokens" in self.path else {})
                return
            request = json.loads(body)
            with model.lock:
                model.requests.append(request)
                blocks = model.answer(request)
            turn = model.turn_of(request)
            if turn is not None and turn.after is not None:
                turn.after.wait(timeout=180)  # outside the lock: the test holds this session here
            if not request.get("stream"):
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                self.json(
                    {
                        "id": "msg_scripted",
                        "type": "message",
                        "role": "assistant",
                        "model": request.get("model", "claude"),
                        "content": blocks,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 1},
                    }
                )
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for name, data in _events(blocks, request.get("model", "claude")):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        def do_GET(self) -> None:
            self.json({})

    return Handler


@contextmanager
def serving(model: ScriptedModel) -> Iterator[str]:
    """Serve ``model`` on a loopback port; yields the base URL for ``ANTHROPIC_BASE_URL``."""
    with loopback(_handler(model)) as url:
        yield url
