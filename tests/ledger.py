"""Helpers for tests of in-doubt calls settled by a tool policy: the policy, the ledger server's record, verify."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from support import checkpoint_argv

POLICY = """
[tools.send_email.probe]
tool = "{probe}"
arguments = {{ to = "/to", subject = "/subject" }}
happened_if = {{ pointer = "/count", equals = 1 }}
not_happened_if = {{ pointer = "/count", equals = 0 }}
timeout = "1s"

[tools.{probe}]
read_only = true

[tools.charge_card]
idempotency = {{ argument = "idempotency_key" }}
"""
"""E-mails settled by a probe (``{probe}``: list_outbox, or one of the ledger server's broken probes), charges by
the upstream's idempotency key."""


def ledger(directory: Path) -> list[dict[str, Any]]:
    """What the ledger server (``servers/ledger_server.py``) really did, in order."""
    path = directory / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def verified(journal: str) -> None:
    """`checkpoint journal verify` finds the hash chain intact and every row as the chain says."""
    done = subprocess.run(
        checkpoint_argv("journal", "verify", "--journal", journal),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def step(n: int) -> tuple[str, dict[str, Any]]:
    """Step ``n`` of a scripted agent: odd steps send an e-mail, even steps charge a card."""
    if n % 2:
        return "send_email", {"to": f"user{n}@example.com", "subject": f"step {n}"}
    return "charge_card", {"customer": f"customer{n}", "cents": 100 * n}
