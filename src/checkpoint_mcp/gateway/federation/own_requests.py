"""Requests of the gateway's own to one channel's upstream (a member's ``initialize``, a list, a probe), and how
one fails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from checkpoint_mcp.errors import UpstreamError
from checkpoint_mcp.gateway.backend import Backend
from checkpoint_mcp.gateway.streams import Stream, StreamKind
from checkpoint_mcp.wire import WireParseError, classify, encode

ASK_TIMEOUT = 10.0  # seconds a member has to answer a list or an initialize before it is left out


class AskFailed(UpstreamError):
    """A request of the gateway's own got an error (``code``: the JSON-RPC code, None for no answer at all)."""

    def __init__(self, method: str, code: Any, text: str) -> None:
        self.code = code
        super().__init__(f"{method}: {text}")


async def ask(channel: Backend, method: str, params: Mapping[str, Any], ident: str) -> dict[str, Any]:
    """Send one request of the gateway's own to ``channel``'s upstream and return its result.

    Raises:
        AskFailed: it answered with an error (or the gateway did for it: unreachable, exited).
        TimeoutError: it did not answer within ``ASK_TIMEOUT``.
    """
    line = encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)})
    stream = Stream(f"ask.{ident}", StreamKind.REQUEST, method)
    channel.submit(classify(line), line, stream)
    async with asyncio.timeout(ASK_TIMEOUT):
        await stream.wait_beyond(0)
        while not stream.finished:
            await stream.wait_beyond(stream.end)
    body = stream.answer
    if body is None and stream.lines:
        with contextlib.suppress(WireParseError):
            body = classify(stream.lines[-1]).body
    if not isinstance(body, dict) or not isinstance(body.get("result"), dict):
        error = body.get("error") if isinstance(body, dict) else None
        text = error.get("message") if isinstance(error, dict) else "no answer"
        raise AskFailed(method, error.get("code") if isinstance(error, dict) else None, str(text))
    result: dict[str, Any] = body["result"]
    return result
