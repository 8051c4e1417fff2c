"""An official-SDK MCP server whose tool asks the user to confirm before its side effect.

In the 2026-07-28 era the question travels as an ``input_required`` result and the client re-sends the call
with ``inputResponses``; in the handshake era it is an ``elicitation/create`` request in the middle of the call.
Each confirmed call appends one line to ``EFFECTS_FILE``.
"""

from __future__ import annotations

import json
import os
from typing import Annotated

from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from pydantic import BaseModel

app = MCPServer("elicit-test", version="2.0.0")


class Confirm(BaseModel):
    ok: bool


def ask(to: str) -> Elicit[Confirm]:
    return Elicit(f"Send a gift to {to}?", Confirm)


@app.tool()
def send_gift(to: str, confirm: Annotated[Confirm, Resolve(ask)]) -> str:
    """Send a gift after the user confirms."""
    if not confirm.ok:
        return "not sent"
    with open(os.environ["EFFECTS_FILE"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": "done", "tool": "send_gift", "arguments": {"to": to}}) + "\n")
    return f"gift sent to {to}"


if __name__ == "__main__":
    app.run()
