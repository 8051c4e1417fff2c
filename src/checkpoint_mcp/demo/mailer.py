"""The demo's upstream: an MCP server (official SDK) whose tools leave visible marks on disk.

``send_email`` appends a line to the outbox file and ``charge_card`` to the ledger file (``DEMO_OUTBOX`` and
``DEMO_LEDGER``; by default ``outbox.txt`` and ``ledger.txt`` in the working directory), so anyone can count how
many times each side effect really happened.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

app = MCPServer("demo-mailer", instructions="Sends e-mail and charges cards. Every call is a real side effect.")


def _append(env_var: str, default: str, line: str) -> None:
    path = Path(os.environ.get(env_var, default))
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@app.tool()
def send_email(to: str, subject: str) -> str:
    """Send an e-mail (appends it to the outbox)."""
    _append("DEMO_OUTBOX", "outbox.txt", f"to={to} subject={subject!r}")
    return f"sent {subject!r} to {to}"


@app.tool()
def charge_card(customer: str, cents: int) -> str:
    """Charge a customer's card (appends it to the ledger)."""
    _append("DEMO_LEDGER", "ledger.txt", f"customer={customer} cents={cents}")
    return f"charged {customer} {cents / 100:.2f} EUR"


if __name__ == "__main__":
    app.run()
