"""A repeat caught by a tool policy is seen everywhere the operator and the resumed agent look: `journal show`
(text and JSON), `journal export`, the operator's pages, and the resume brief with its structured content."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.session.effects import TITLE
from checkpoint_mcp.ui import pages, views

from .conftest import SessionFactory
from .helpers import text_of
from support import checkpoint_argv, done_count, effects_proxy

pytestmark = pytest.mark.anyio

MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


def _send_from_a_fresh_proxy(journal: Path, tmp_path: Path, policy: Path) -> dict[str, Any]:
    with effects_proxy(str(journal), tmp_path, "--policy", str(policy)) as proxy:
        proxy.initialize()
        reply = proxy.call("send_email", MAIL)
        assert proxy.close() == 0
    return reply


def _checkpoint(*args: str) -> str:
    done = subprocess.run(checkpoint_argv(*args), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_caught_repeat_shows_in_show_export_the_pages_and_the_brief(
    repo: Path, tmp_path: Path, session: SessionFactory
) -> None:
    journal = tmp_path / "mail.db"
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nrepeat = "replay"\n', encoding="utf-8")
    assert "result" in _send_from_a_fresh_proxy(journal, tmp_path, policy)
    with anyio.fail_after(60):
        async with session(repo, args=["--journal", str(journal)]) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "Send the invoices"})
    assert not saved.is_error, text_of(saved)
    for _ in range(2):  # after a /clear, the agent sends the mail again, twice
        replayed = _send_from_a_fresh_proxy(journal, tmp_path, policy)
        assert replayed["result"]["_meta"]["checkpoint/journal"]["repeatOf"]["seq"] == 1
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1

    shown = _checkpoint("journal", "show", "--journal", str(journal))
    assert "Tool policy:" in shown
    assert shown.count("repeat of #1 (send_email) at ") == 2
    assert "answered with its result (replayed) [tools.send_email, window 24h]" in shown
    as_json = json.loads(_checkpoint("journal", "show", "--journal", str(journal), "--json"))
    assert [(n["type"], n["seq"], n["action"]) for n in as_json["policyNotes"]] == [("repeat", 1, "replayed")] * 2
    one = json.loads(_checkpoint("journal", "show", "--journal", str(journal), "--seq", "1", "--json"))
    assert len(one["policyNotes"]) == 2
    exported = [json.loads(line) for line in _checkpoint("journal", "export", "--journal", str(journal)).splitlines()]
    assert sum(1 for line in exported if line.get("kind") == "repeat") == 2

    store = open_journal(str(journal), create=False)
    try:
        timeline = views.timeline(store, str(journal))
        call = views.call_view(store, str(journal), 1)
    finally:
        store.close()
    page = pages.Page(pages.Links("/", "/w", "/c", "/r", "/v"), "nonce", None, str(journal))
    workflow_html = pages.workflow_page(page, timeline, "")
    call_html = pages.call_page(page, call, "csrf")
    assert "<h2>Tool policy</h2>" in workflow_html
    for html in (workflow_html, call_html):
        assert html.count("repeat of #1 (send_email) at ") == 2
        assert "answered with its result (replayed)" in html

    with anyio.fail_after(60):
        async with session(repo, args=["--journal", str(journal)]) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
    brief = text_of(loaded)
    section = brief.partition(f"\n\n{TITLE}\n")[2]
    assert (
        "- #1 `send_email` was sent again 2× and caught by the tool policy (answered with the first result)" in section
    )
    assert "it ran once, do not send it again" in section
    (entry,) = (loaded.structured_content or {})["journals"]
    assert [(r["seq"], r["tool"], r["action"]) for r in entry["repeatsCaught"]] == [(1, "send_email", "replayed")] * 2
