"""The benchmarks' upstream over Streamable HTTP: the same answers as ``upstream_server.py``, over HTTP/1.1.

A raw asyncio server (no SDK, no framework), so a round trip costs what HTTP costs and little more: it reads a
request with a ``content-length`` body, answers with a JSON body on the same kept-alive connection, gives
``initialize`` an ``Mcp-Session-Id``, acknowledges notifications with 202 and refuses GET (no server-initiated
stream) with 405. It prints ``PORT <n>`` once it listens on 127.0.0.1 (port 0: the kernel picks one).

Run: ``python benchmarks/http_upstream.py [--result-bytes N]``.
"""

from __future__ import annotations

import asyncio
import socket
import sys

from upstream_server import answer, call_result

_ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
_NO_STREAM = b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n"


def _ok(body: bytes, session: bool) -> bytes:
    extra = b"mcp-session-id: bench-session\r\n" if session else b""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + extra
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, call: str) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method = head[: head.find(b" ")]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length) if length else b""
            if method == b"DELETE":
                writer.write(_ACCEPTED)
            elif method != b"POST":
                writer.write(_NO_STREAM)
            else:
                reply, _ = answer(body, call)
                writer.write(_ACCEPTED if reply is None else _ok(reply.rstrip(b"\n"), b'"initialize"' in body))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(argv: list[str]) -> int:
    size = int(argv[1]) if len(argv) == 2 and argv[0] == "--result-bytes" else 0
    call = call_result(size)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(lambda r, w: _serve(r, w, call), sock=sock, backlog=256)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
