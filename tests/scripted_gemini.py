"""A scripted model behind a small fake of the Gemini API, to drive the real Gemini CLI headless (``gemini -p``).

Gemini CLI with ``GOOGLE_GEMINI_BASE_URL`` and an API key posts the conversation to
``/v1beta/models/<model>:streamGenerateContent?alt=sse`` (``contents`` of ``user``/``model`` turns, ``tools`` as
``functionDeclarations``) and reads Server-Sent Events, each ``data:`` a ``GenerateContentResponse``; side
requests (``:generateContent``: the model router's score, asked with a JSON schema; ``:countTokens``) get the
plainest answer their schema allows. The "model" is the same plan as
``scripted_model``'s: one tool call (a ``functionCall`` part) per turn, then a closing text; a call's name is the
one Gemini declares, ``mcp_<server>_<tool>`` for an MCP tool.

Every streamed request is kept (``requests``), so a test reads what the model was shown: the SessionStart hook's
``additionalContext`` (prepended to the prompt in a headless session), and each ``functionResponse``. On the
first request, the command lines and environments of the processes whose command line or working folder holds
``watch`` (a test's temporary folder) are kept too (``processes``): the servers Gemini started are running then.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fake_api import QuietHandler, loopback
from scripted_model import ToolCall


@dataclass(frozen=True)
class Process:
    """One process as ``/proc`` showed it: its NUL-separated command line and environment."""

    pid: int
    cmdline: bytes
    environ: bytes


@dataclass
class ScriptedGemini:
    """The plan, every streamed request Gemini CLI sent, and the processes seen on the first one."""

    plan: list[ToolCall]
    closing: str = "Done."
    watch: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The next model turn, from how many function calls the conversation holds."""
        done = sum(
            1
            for content in request.get("contents", [])
            if content.get("role") == "model"
            for part in content.get("parts", [])
            if isinstance(part, dict) and "functionCall" in part
        )
        if done < len(self.plan):
            call = self.plan[done]
            return {"functionCall": {"name": call.name, "args": call.arguments}}
        return {"text": self.closing}

    def function_responses(self) -> list[str]:
        """Every ``functionResponse`` of the last request, as JSON text, in order (what the model saw of each
        call)."""
        if not self.requests:
            return []
        return [
            json.dumps(part["functionResponse"])
            for content in self.requests[-1].get("contents", [])
            for part in content.get("parts", [])
            if isinstance(part, dict) and "functionResponse" in part
        ]

    def declared(self) -> list[str]:
        """The names of the functions Gemini declared in its first request."""
        tools = self.requests[0].get("tools", []) if self.requests else []
        return [d["name"] for tool in tools for d in tool.get("functionDeclarations", [])]

    def snapshot(self) -> None:
        """Keep the command line and environment of every process whose command line or working folder holds
        ``watch``."""
        if not self.watch:
            return
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                inside = self.watch.encode() in cmdline or os.readlink(entry / "cwd").startswith(self.watch)
                if inside:
                    self.processes.append(Process(int(entry.name), cmdline, (entry / "environ").read_bytes()))
            except OSError:
                continue  # gone, or not ours


def _chunk(part: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
        "modelVersion": "scripted",
    }


def _filled(schema: dict[str, Any]) -> Any:
    """The plainest value of a JSON schema (Gemini's upper-case type names): what a side request asks for."""
    kind = str(schema.get("type", "")).upper()
    if kind == "OBJECT":
        properties = schema.get("properties", {})
        return {name: _filled(properties[name]) for name in schema.get("required", properties)}
    return {"STRING": "", "INTEGER": 1, "NUMBER": 1, "BOOLEAN": False, "ARRAY": []}.get(kind)


def _handler(model: ScriptedGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if ":countTokens" in self.path:
                self.json({"totalTokens": 10})
                return
            request = json.loads(body or b"{}")
            if ":streamGenerateContent" not in self.path:
                # A side request (the model router's complexity score, a summary): not part of the plan.
                schema = request.get("generationConfig", {}).get("responseJsonSchema")
                text = json.dumps(_filled(schema)) if isinstance(schema, dict) else "ok"
                self.json(_chunk({"text": text}))
                return
            with model.lock:
                if not model.requests:
                    model.snapshot()
                model.requests.append(request)
                part = model.answer(request)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(_chunk(part))}\r\n\r\n".encode())
            self.wfile.flush()

        def do_GET(self) -> None:
            self.json({})

    return Handler


@contextmanager
def serving(model: ScriptedGemini) -> Iterator[str]:
    """Serve ``model`` on a loopback port; yields the base URL for ``GOOGLE_GEMINI_BASE_URL``."""
    with loopback(_handler(model)) as url:
        yield url
