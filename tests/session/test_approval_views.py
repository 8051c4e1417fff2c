"""load_session_checkpoint through a real `checkpoint session` server: after a save, the brief and its structured
content name the approval a person granted since, for a call that has not run yet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.session.effects import TITLE

from .conftest import SessionFactory
from .helpers import text_of
from support import done_count, effects_proxy

pytestmark = pytest.mark.anyio

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


def _send(journal: Path, tmp_path: Path, policy: Path) -> dict[str, Any]:
    with effects_proxy(str(journal), tmp_path, "--policy", str(policy)) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", MAIL)
        assert proxy.close() == 0
    return reply


async def test_a_load_after_the_save_names_the_approved_call_to_send_again(
    repo: Path, tmp_path: Path, session: SessionFactory
) -> None:
    journal = tmp_path / "mail.db"
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    approval_id = _send(journal, tmp_path, policy)["error"]["data"]["approval"]
    with anyio.fail_after(60):
        async with session(repo, args=["--journal", str(journal)]) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "Send Bob his invoice"})
            assert not saved.is_error, text_of(saved)
            store = open_journal(str(journal), create=False)
            try:
                store.approvals.decide_approval(approval_id, True, "alice")
            finally:
                store.close()
            loaded = await client.call_tool("load_session_checkpoint", {})

    _, _, section = text_of(loaded).partition(f"\n\n{TITLE}\n")
    assert section.startswith("### Approvals: "), section
    line = section.splitlines()[1]
    assert line.startswith(f'- Approved, not yet sent: #{approval_id} `send_email` `{{"to":"bob@example.com",'), line
    assert "(by alice, usable until " in line, line
    data: dict[str, Any] = loaded.structured_content or {}
    (entry,) = data["journals"]
    (approved,) = entry["approvals"]
    assert approved["id"] == approval_id
    assert approved["status"] == "approved"
    assert approved["decidedBy"] == "alice"
    assert approved["expiresAt"] > approved["requestedAt"]
    assert "commands" not in approved  # nothing left for a person to do
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 0
