"""A scripted model behind a small fake of the OpenAI Chat Completions API, to drive the agent CLIs that speak it
(OpenCode, GitHub Copilot CLI, Cline, Qwen Code) headless, with no login, against loopback.

Each CLI posts ``<base_url>/chat/completions`` (most with ``"stream": true``: answered with Server-Sent Events of
``chat.completion.chunk`` objects and ``data: [DONE]``; without it, one ``chat.completion``). The "model" is the
same plan as ``scripted_responses``: one call of an MCP tool per turn (``McpCall``: the server and the tool), then
a closing text; the function it calls is the one the CLI offered for that tool, whatever the CLI's naming
(``mailbox_send_email``, ``mailbox-send_email``, ``mcp__mailbox__send_email``…). A request that offers no tools
(a title, a summary) is a side request: it gets a short text and is not part of the plan.

Every request is kept (``requests``), so a test reads what the model was shown: the system prompt and messages of
the first request that offered tools (where a session-start hook's or a plugin's text arrives), and each tool
result (``role: "tool"`` messages).
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from fake_api import QuietHandler, loopback
from scripted_responses import McpCall

__all__ = ["ChatModel", "McpCall", "serving"]


@dataclass
class ChatModel:
    """The plan, and every request the CLI sent."""

    plan: list[McpCall]
    closing: str = "Done."
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    tag: str = field(default_factory=lambda: secrets.token_hex(4))

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The next assistant message: the next planned call (counted by this model's call ids among the
        conversation's messages), or the closing text; a side request (no tools) gets a short text."""
        tools = request.get("tools") or []
        if not tools:
            return {"role": "assistant", "content": "Checkpoint session"}
        mine = f"call_{self.tag}_"
        done = sum(
            1
            for message in request.get("messages") or []
            if message.get("role") == "assistant"
            for call in message.get("tool_calls") or []
            if str(call.get("id", "")).startswith(mine)
        )
        turns = self.turns(tools)
        if done >= len(turns):
            return {"role": "assistant", "content": self.closing}
        name, arguments = turns[done]
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"{mine}{done}", "type": "function", "function": function}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def turns(self, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        """The plan as (function, arguments) turns: a tool the CLI offered is called by its name; one it defers
        (Qwen Code offers MCP tools only by name in a reminder, behind ``tool_search`` and ``tool_call``) is
        looked up with ``tool_search`` ``select:`` first, then called through ``tool_call``, as a real model
        does."""
        names = {str((t.get("function") or {}).get("name")) for t in tools}
        turns: list[tuple[str, dict[str, Any]]] = []
        for call in self.plan:
            try:
                turns.append((offered(tools, call.server, call.tool), call.arguments))
            except AssertionError:
                if not {"tool_search", "tool_call"} <= names:
                    raise
                deferred = f"mcp__{call.server}__{call.tool}"
                turns.append(("tool_search", {"query": f"select:{deferred}"}))
                turns.append(("tool_call", {"name": deferred, "arguments": call.arguments}))
        return turns

    def sessions(self) -> list[dict[str, Any]]:
        """The requests that offered tools: the conversation's own turns, side requests left out."""
        return [request for request in self.requests if request.get("tools")]

    def first_prompt(self) -> str:
        """Every text of the first request that offered tools (its system prompt and messages), as one string."""
        turns = self.sessions()
        assert turns, f"the CLI never asked the model with tools ({len(self.requests)} requests)"
        return "\n".join(_texts(message.get("content")) for message in turns[0].get("messages") or [])

    def tool_results(self) -> list[str]:
        """The text of every tool result in the last request that offered tools, in order."""
        turns = self.sessions()
        if not turns:
            return []
        return [_texts(m.get("content")) for m in turns[-1].get("messages") or [] if m.get("role") == "tool"]

    def offered_names(self) -> list[str]:
        """The names of the functions the first request with tools offered."""
        turns = self.sessions()
        return [str((t.get("function") or {}).get("name")) for t in turns[0].get("tools") or []] if turns else []


def _texts(content: Any) -> str:
    """A message's content as text: a string, or a list of ``text`` parts."""
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


_NOT_WORD = re.compile(r"[^a-z0-9]+")


def offered(tools: list[dict[str, Any]], server: str, tool: str) -> str:
    """The name under which the CLI offered ``server``'s ``tool`` (each CLI joins the two its own way).

    Raises:
        AssertionError: the CLI did not offer the tool (its server did not start, or was not approved).
    """
    names = [str((entry.get("function") or {}).get("name", "")) for entry in tools]
    want_server, want_tool = _NOT_WORD.sub("", server.lower()), _NOT_WORD.sub("", tool.lower())
    for name in names:
        plain = _NOT_WORD.sub("", name.lower())
        if plain.endswith(want_tool) and want_server in plain[: len(plain) - len(want_tool)]:
            return name
    raise AssertionError(f"the CLI did not offer {server}/{tool}; it offered {names}")


def _chunks(message: dict[str, Any], model: str) -> Iterator[dict[str, Any]]:
    base = {"id": f"chatcmpl-{secrets.token_hex(4)}", "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = model
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        finish = "tool_calls"
    else:
        delta["content"] = message["content"]
        finish = "stop"
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}


def _completion(message: dict[str, Any], model: str) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{secrets.token_hex(4)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }


def _handler(model: ChatModel) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
                self.json(status=404, value={"error": {"message": f"no {self.path} here"}})
                return
            request = json.loads(body)
            with model.lock:
                model.requests.append(request)
                try:
                    message = model.answer(request)
                except AssertionError as exc:
                    message = {"role": "assistant", "content": f"scripted model: {exc}"}
            name = str(request.get("model", "scripted"))
            if not request.get("stream"):
                self.json(_completion(message, name))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for chunk in _chunks(message, name):
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def do_GET(self) -> None:
            model_entry = {"id": "scripted", "object": "model", "created": 0, "owned_by": "checkpoint-tests"}
            self.json({"object": "list", "data": [model_entry]})

    return Handler


@contextmanager
def serving(model: ChatModel) -> Iterator[str]:
    """Serve ``model`` on a loopback port; yields the base URL of an OpenAI-compatible provider (``.../v1``)."""
    with loopback(_handler(model)) as url:
        yield url + "/v1"
