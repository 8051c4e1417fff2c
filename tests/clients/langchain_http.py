"""Drive `langchain-mcp-adapters` (run by .venv-langchain's Python, which has mcp<2) against an MCP server over
Streamable HTTP, as an agent would: load its tools, print their names, invoke one. Prints JSON lines on stdout.

Usage: python langchain_http.py URL TOOL ARGUMENTS_JSON [HEADER_NAME HEADER_VALUE]
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(url: str, tool_name: str, arguments: dict[str, Any], headers: dict[str, str]) -> None:
    client = MultiServerMCPClient({"gateway": {"transport": "streamable_http", "url": url, "headers": headers}})
    tools = {tool.name: tool for tool in await client.get_tools()}
    print(json.dumps({"tools": sorted(tools)}))
    try:
        content = await tools[tool_name].ainvoke(arguments)
        print(json.dumps({"ok": True, "content": content if isinstance(content, str) else str(content)}))
    except Exception as exc:  # the framework raises the JSON-RPC error as an exception
        print(json.dumps({"ok": False, "type": type(exc).__name__, "error": str(exc)}))


if __name__ == "__main__":
    extra = dict(zip(sys.argv[4::2], sys.argv[5::2], strict=True))
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), extra))
