"""The benchmarks' upstream served directly over Streamable HTTP, with the official SDK: the gateway's baseline.

The same tool as ``upstream_server.py`` (``echo``: a tiny text result), in an ``MCPServer`` served by uvicorn with
JSON responses, as a user would serve a Python MCP server over HTTP without any proxy.

Run: ``.venv/bin/python benchmarks/sdk_http_upstream.py PORT``.
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

app = MCPServer("bench-upstream", version="1.0.0")


@app.tool()
def echo(n: int = 0) -> str:
    """Returns a tiny fixed text."""
    return "ok"


def main(argv: list[str]) -> int:
    """Serve on 127.0.0.1:PORT until killed."""
    port = int(argv[0])
    asgi = app.streamable_http_app(json_response=True)
    uvicorn.run(asgi, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
