"""FastMCP's proxy served over HTTP in front of the stdio upstream: the contender a user would pick for a URL.

Runs in FastMCP's own virtual environment (``.venv-fastmcp``), as ``fastmcp_proxy.py`` does for stdio.

Run: ``.venv-fastmcp/bin/python benchmarks/fastmcp_http_proxy.py PORT <upstream argv...>``.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Serve the proxy on 127.0.0.1:PORT until killed."""
    if len(argv) < 2:
        print("usage: fastmcp_http_proxy.py PORT COMMAND [ARGS...]", file=sys.stderr)
        return 2
    from fastmcp.client.transports import StdioTransport
    from fastmcp.server import create_proxy

    proxy = create_proxy(StdioTransport(command=argv[1], args=argv[2:]), name="fastmcp-proxy")
    proxy.run(transport="http", host="127.0.0.1", port=int(argv[0]), show_banner=False, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
