"""The demo's upstream: an MCP server (official SDK) whose tools leave visible marks on disk.

``send_email`` appends a line to the outbox file and ``charge_card`` to the ledger file (``DEMO_OUTBOX`` and
``DEMO_LEDGER``; by default ``outbox.txt`` and ``ledger.txt`` in the working directory), so anyone can count how
many times each side effect really happened. Two things a real mail service and a real card processor offer
make in-doubt calls settle themselves under a tool policy:

* ``list_outbox`` (read-only) counts the e-mails sent to someone with a subject: a probe;
* ``charge_card`` takes an ``idempotency_key``, as payment APIs do: a charge repeated with a key already charged
  returns the first charge's answer and charges nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

app = MCPServer("demo-mailer", instructions="Sends e-mail and charges cards. Every call is a real side effect.")


def _path(env_var: str, default: str) -> Path:
    return Path(os.environ.get(env_var, default))


def _append(env_var: str, default: str, line: str) -> None:
    with _path(env_var, default).open("a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def _lines(env_var: str, default: str) -> list[str]:
    path = _path(env_var, default)
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _mail(to: str, subject: str) -> str:
    return f"to={to} subject={subject!r}"


@app.tool(structured_output=False)
def send_email(to: str, subject: str) -> str:
    """Send an e-mail (appends it to the outbox)."""
    _append("DEMO_OUTBOX", "outbox.txt", _mail(to, subject))
    return f"sent {subject!r} to {to}"


class Outbox(BaseModel):
    """How many e-mails the outbox holds for one recipient and subject."""

    count: int


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_outbox(to: str, subject: str) -> Outbox:
    """Count the e-mails sent to ``to`` with ``subject`` (reads the outbox; changes nothing)."""
    return Outbox(count=_lines("DEMO_OUTBOX", "outbox.txt").count(_mail(to, subject)))


@app.tool(structured_output=False)
def charge_card(customer: str, cents: int, idempotency_key: str = "") -> str:
    """Charge a customer's card (appends it to the ledger). A charge repeated with the same idempotency key
    charges nothing and answers as the first one did."""
    answer = f"charged {customer} {cents / 100:.2f} EUR"
    if idempotency_key and any(
        line.endswith(f" key={idempotency_key}") for line in _lines("DEMO_LEDGER", "ledger.txt")
    ):
        return answer
    suffix = f" key={idempotency_key}" if idempotency_key else ""
    _append("DEMO_LEDGER", "ledger.txt", f"customer={customer} cents={cents}{suffix}")
    return answer


if __name__ == "__main__":
    app.run()
