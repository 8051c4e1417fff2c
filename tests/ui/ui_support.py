"""Journals the UI tests start from, written by real proxies."""

from __future__ import annotations

from pathlib import Path

from support import effects_proxy


def crashed_journal(tmp_path: Path, workflow: str = "wf") -> str:
    """A journal whose ``workflow`` has call #1 (send_email to ann) in doubt: its proxy SIGKILLed itself right
    after committing the PENDING row."""
    journal = str(tmp_path / "j.db")
    with effects_proxy(journal, tmp_path, "--workflow-id", workflow, trigger="after_pending_commit") as proxy:
        proxy.initialize()
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "ann"}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        assert proxy.proc.wait(20) == -9
    return journal
