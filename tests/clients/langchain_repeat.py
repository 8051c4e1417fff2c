"""Drive `langchain-mcp-adapters` (run by .venv-langchain's Python, which has mcp<2) as an agent would: load the
tools of one stdio MCP server and invoke a tool twice with the same arguments. The framework opens a new session,
so a new `checkpoint`, for each call, and passes no `_meta`. Prints one JSON line per call on stdout.

Usage: python langchain_repeat.py PYTHON TOOL ARGUMENTS_JSON -- CHECKPOINT_ARGS...
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(python: str, tool_name: str, arguments: dict[str, Any], checkpoint_args: list[str]) -> None:
    client = MultiServerMCPClient(
        {
            "upstream": {
                "transport": "stdio",
                "command": python,
                "args": ["-m", "checkpoint_mcp", *checkpoint_args],
                "env": dict(os.environ),  # the SDK passes only a safe few variables by default
            }
        }
    )
    tools = {tool.name: tool for tool in await client.get_tools()}
    for _ in range(2):
        try:
            content = await tools[tool_name].ainvoke(arguments)
            print(json.dumps({"ok": True, "content": content if isinstance(content, str) else str(content)}))
        except Exception as exc:  # the framework raises the JSON-RPC error as an exception
            print(json.dumps({"ok": False, "type": type(exc).__name__, "error": str(exc)}))
        sys.stdout.flush()


if __name__ == "__main__":
    separator = sys.argv.index("--")
    python, tool, arguments = sys.argv[1:separator]
    asyncio.run(main(python, tool, json.loads(arguments), sys.argv[separator + 1 :]))
