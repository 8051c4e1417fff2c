"""A small MCP client of our own over any ``Upstream``, for the operator's commands that ask a server something.

`checkpoint policy check --upstream-cmd …` asks the upstream for its ``tools/list``, as the proxy would see it.
The client does the handshake (``initialize``, ``notifications/initialized``), sends requests with its own ids
and waits, bounded by a timeout, for their answers; a request from the server (``ping``, ``roots/list``…) gets
an answer too, so the server never waits on us. It journals nothing and decides nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

from checkpoint_mcp.config import RemoteConfig
from checkpoint_mcp.errors import UpstreamError
from checkpoint_mcp.platforms.commands import shell_name
from checkpoint_mcp.refusals import METHOD_NOT_FOUND
from checkpoint_mcp.upstream.base import Upstream
from checkpoint_mcp.upstream.stdio.process import spawn
from checkpoint_mcp.wire import Kind, WireParseError, classify, encode, id_key

PROTOCOL_VERSION: Final = "2025-06-18"
CLIENT_INFO: Final = {"name": "checkpoint", "version": "0"}
MAX_PAGES: Final = 1000  # a server whose tools/list cursor never ends is not followed for ever


def open_upstream(upstream_cmd: str | None, remote: RemoteConfig | None) -> Upstream:
    """The upstream to ask: a child started now by ``/bin/sh -c``, or the remote server at its URL.

    Raises:
        UpstreamError: the child could not be started.
        UsageError: a remote upstream's settings cannot work.
    """
    if remote is not None:
        from checkpoint_mcp.upstream.http.settings import open_remote

        return open_remote(remote, os.environ)
    assert upstream_cmd is not None
    try:
        process = spawn(upstream_cmd)
    except OSError as exc:
        raise UpstreamError(f"cannot start the upstream with {shell_name()}: {exc}") from exc
    from checkpoint_mcp.upstream.stdio.child import ChildUpstream

    return ChildUpstream(process)


class McpClient:
    """One MCP session with an upstream; use as ``async with McpClient(upstream, timeout) as client``."""

    def __init__(self, upstream: Upstream, timeout: float) -> None:
        self._upstream = upstream
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._gone = False
        self.server_info: Mapping[str, Any] = {}
        self._headers: dict[tuple[str, Any] | None, dict[str, str]] = {}  # a request's own HTTP headers, by id
        remote = sys.modules.get("checkpoint_mcp.upstream.http.remote")  # loaded if the upstream is one
        if remote is not None and isinstance(upstream, remote.RemoteUpstream):
            upstream.request_headers = lambda key: self._headers.get(key, {})

    async def __aenter__(self) -> McpClient:
        """Start the upstream and do the handshake.

        Raises:
            UpstreamError: the server did not answer ``initialize`` in time, refused it, or exited.
        """
        await self._upstream.start(self)
        try:
            result = await self.request(
                "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
            )
        except BaseException:
            await self._upstream.shutdown()
            raise
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        self._upstream.send(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._upstream.shutdown()

    async def exchange(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send a request and return the whole response message (a ``result`` or an ``error``); ``headers`` go
        with its POST to an ``--upstream-url`` upstream (a stdio child has none).

        Raises:
            UpstreamError: the server exited, or did not answer within ``timeout`` (by default the client's).
        """
        if self._gone:
            raise UpstreamError(f"the upstream exited before {method} could be sent")
        ident = next(self._ids)
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = answer
        if headers:
            self._headers[id_key(ident)] = dict(headers)
        self._upstream.send(encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)}))
        limit = self._timeout if timeout is None else timeout
        try:
            return await asyncio.wait_for(answer, limit)
        except TimeoutError:
            raise UpstreamError(f"the upstream did not answer {method} within {limit:g}s") from None
        finally:
            self._waiting.pop(ident, None)
            self._headers.pop(id_key(ident), None)

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Send a request and return its ``result`` object.

        Raises:
            UpstreamError: the server answered with an error or a result that is not an object, exited, or did
                not answer within the timeout.
        """
        message = await self.exchange(method, params)
        if "error" in message:
            raise UpstreamError(f"the upstream refused {method}: {json.dumps(message['error'])[:300]}")
        result = message.get("result")
        if not isinstance(result, dict):
            raise UpstreamError(f"the upstream answered {method} with a result that is not an object")
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of ``tools/list``, following its pages.

        Raises:
            UpstreamError: as ``request``, or a page without a ``tools`` array.
        """
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self.request("tools/list", {"cursor": cursor} if cursor is not None else {})
            listed = page.get("tools")
            if not isinstance(listed, list):
                raise UpstreamError("the upstream answered tools/list without a tools array")
            tools.extend(tool for tool in listed if isinstance(tool, dict))
            cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
            if not cursor:
                break
        return tools

    # ---- UpstreamSink -------------------------------------------------------------------------------------

    def upstream_lines(self, lines: list[bytes]) -> None:
        """Answers wake their request; a request from the server is answered as not supported."""
        for line in lines:
            try:
                message = classify(line)
            except WireParseError:
                continue
            if message.kind is Kind.RESPONSE and isinstance(message.id, int):
                waiting = self._waiting.get(message.id)
                if waiting is not None and not waiting.done():
                    waiting.set_result(message.body)
            elif message.kind is Kind.REQUEST:
                result: dict[str, Any] = {"jsonrpc": "2.0", "id": message.id}
                if message.method == "ping":
                    result["result"] = {}
                else:
                    result["error"] = {"code": METHOD_NOT_FOUND, "message": f"method not found: {message.method}"}
                self._upstream.send(encode(result))

    def upstream_closed(self) -> None:
        """The server is gone: every request still waiting fails."""
        self._gone = True
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(UpstreamError("the upstream exited before answering"))

    def pause_client(self, paused: bool) -> None:
        """Nothing to pause: the client is this object."""

    def request_abandoned(self, ident: Any, reason: str) -> None:
        """The exchange of one request broke (a remote upstream): it fails."""
        waiting = self._waiting.get(ident) if isinstance(ident, int) else None
        if waiting is not None and not waiting.done():
            waiting.set_exception(UpstreamError(f"the upstream did not answer: {reason}"))


async def server_and_tools_of(upstream: Upstream, timeout: float) -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
    """Start (or reach) ``upstream``, ask for its tools and end it again, all within ``timeout`` seconds: its
    ``serverInfo`` (from ``initialize``; empty when it gave none) and its tools.

    Raises:
        UpstreamError: the server exited, refused, or did not answer in time.
    """

    async def ask() -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
        async with McpClient(upstream, timeout) as client:
            return client.server_info, await client.list_tools()

    try:
        return await asyncio.wait_for(ask(), timeout)
    except TimeoutError:
        raise UpstreamError(f"it did not list its tools within {timeout:g}s") from None


def fetch_tools(upstream_cmd: str | None, remote: RemoteConfig | None, timeout: float) -> list[dict[str, Any]]:
    """Start (or reach) the upstream, ask for its tools, and end it again.

    Raises:
        UpstreamError: the server could not be started, or did not answer in time.
        UsageError: a remote upstream's settings cannot work.
    """
    return fetch_server_and_tools(upstream_cmd, remote, timeout)[1]


def fetch_server_and_tools(
    upstream_cmd: str | None, remote: RemoteConfig | None, timeout: float
) -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
    """Start (or reach) the upstream, ask for its ``serverInfo`` and its tools, and end it again.

    Raises:
        UpstreamError: the server could not be started, or did not answer in time.
        UsageError: a remote upstream's settings cannot work.
    """
    upstream = open_upstream(upstream_cmd, remote)

    async def ask() -> tuple[Mapping[str, Any], list[dict[str, Any]]]:
        async with McpClient(upstream, timeout) as client:
            return client.server_info, await client.list_tools()

    return asyncio.run(ask())
