"""The lines the federation writes itself (a result or an error for a client's request), and what it reads of a
request's envelope to pass on to its members."""

from __future__ import annotations

from typing import Any

from checkpoint_mcp.wire import PROTOCOL_VERSION_META, Message, encode, error_line


def result(message: Message, value: dict[str, Any]) -> bytes:
    """The answer to ``message`` with ``value`` as its result."""
    return encode({"jsonrpc": "2.0", "id": message.id, "result": value})


def error(message: Message, code: int, text: str, data: dict[str, Any] | None = None) -> bytes:
    """The error answer to ``message``."""
    body: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        body["data"] = data
    return error_line(message.id, body)


def envelope(message: Message) -> dict[str, Any]:
    """The request's ``_meta`` (a 2026-07-28 request's version, client info and capabilities), for the requests
    the federation sends its members on its behalf."""
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    return {"_meta": meta} if isinstance(meta, dict) else {}


def modern(message: Message) -> bool:
    """A 2026-07-28 request (its ``_meta`` names its protocol version)."""
    params = message.params if isinstance(message.params, dict) else {}
    meta = params.get("_meta")
    return isinstance(meta, dict) and PROTOCOL_VERSION_META in meta
