"""The floors under the gateway: the least an HTTP server in Python can do per call, on this machine, in this run.

* ``asgi``: the simplest ASGI echo (read the body, answer a JSON-RPC result for its id) served by uvicorn with the
  same settings and the same event loop and HTTP parser choices as `checkpoint serve` (``build_server_config``);
* ``raw``: an ``asyncio.Protocol`` that parses just enough HTTP/1.1 (head, ``Content-Length``) to answer the same
  JSON, on the same event loop: no framework, no ASGI.

Both answer what the gateway answers a ``tools/call`` of the benchmark (a JSON body with a ``result``), after one
``json.loads`` of the request and one ``json.dumps`` of the answer, so what remains between them and the gateway
is the gateway's own work (routing, guards, the interceptor, the stdio hop to the upstream and back).

Run: ``.venv/bin/python benchmarks/http_floor.py asgi|raw PORT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

RESULT = {"content": [{"type": "text", "text": "ok"}], "isError": False}


def answer(body: bytes) -> bytes:
    """The JSON-RPC result for the request in ``body``."""
    request = json.loads(body)
    return json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": RESULT}).encode()


async def asgi_echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The simplest ASGI app that answers the benchmark's calls."""
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = answer(b"".join(chunks))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RawEcho(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time, ``Content-Length`` bodies only."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not its subclasses

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self._buffer) < end + 4 + length:
                return
            body = answer(bytes(self._buffer[end + 4 : end + 4 + length]))
            del self._buffer[: end + 4 + length]
            assert self._transport is not None
            self._transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )


async def serve_raw(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(RawEcho, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    """Serve one floor on 127.0.0.1:PORT until killed."""
    import uvicorn

    from checkpoint_mcp.gateway.runner import server_settings

    mode, port = argv[0], int(argv[1])
    config = uvicorn.Config(asgi_echo, host="127.0.0.1", port=port, lifespan="off", **server_settings())
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        if mode == "raw":
            runner.run(serve_raw(port))
        else:
            runner.run(uvicorn.Server(config).serve())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
