"""A FastMCP stdio-to-stdio proxy in front of an upstream command: the contender users would pick.

Runs in its own virtual environment (``.venv-fastmcp``; fastmcp's dependencies may clash with ours), the way
FastMCP documents it: ``create_proxy`` on a stdio transport to the upstream, served on stdio.

Run: ``.venv-fastmcp/bin/python benchmarks/fastmcp_proxy.py <upstream argv...>``.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Proxy stdio to the upstream ``argv`` until the client leaves."""
    if not argv:
        print("usage: fastmcp_proxy.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    from fastmcp.client.transports import StdioTransport
    from fastmcp.server import create_proxy

    proxy = create_proxy(StdioTransport(command=argv[0], args=argv[1:]), name="fastmcp-proxy")
    proxy.run(transport="stdio", show_banner=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
