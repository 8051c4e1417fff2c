"""End to end, the two halves meet: a session checkpoint, a journaled proxy killed mid-call, and a new session's
brief that names the in-doubt call with its resolve command and the calls completed since the save.

Real processes throughout: a git repository, `checkpoint` journaling to SQLite in front of the effects server
(whose side effects are counted in a file), `checkpoint session` driven by the official SDK client over stdio,
and `checkpoint brief --hook` as Claude Code's SessionStart hook runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from checkpoint_mcp.session.effects import TITLE

from .conftest import SessionFactory
from .helpers import text_of
from support import checkpoint_argv, done_count, effects_proxy, read_effects

pytestmark = pytest.mark.anyio

SAVE = {
    "goal": "Send this month's invoices",
    "nextSteps": ["Send the invoice to bob", "Send the invoice to carol", "Send the invoice to dan"],
    "tasks": [{"description": "Invoices", "status": "in_progress"}],
}


def _brief_hook(repo: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        checkpoint_argv("brief", "--hook", *args),
        cwd=repo,
        env={**os.environ, **env, "CLAUDE_PROJECT_DIR": str(repo)},  # PYTHONPATH too: this tree
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    context: str = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    return context


def _crash_mid_call(journal: Path, tmp_path: Path) -> None:
    """A new proxy (its calls take sequences 2, 3, 4): two calls complete; the third reaches the effects server, which sends the mail, and the proxy dies before
    the journal records the answer (the upstream is killed with it)."""
    with effects_proxy(str(journal), tmp_path, trigger="after_upstream_reply@3") as proxy:
        proxy.initialize()
        for to in ("bob", "carol"):
            assert "result" in proxy.call("send_email", {"to": to, "subject": "Your invoice"})
        proxy.send(
            {
                "jsonrpc": "2.0",
                "id": 99,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "dan", "subject": "Your invoice"}},
            }
        )
        assert proxy.wait() != 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # the 2025-11-25 handshake, and 2026-07-28
async def test_a_new_session_learns_the_in_doubt_call_and_the_calls_done_since_the_save(
    repo: Path, tmp_path: Path, session: SessionFactory, hermetic_git: dict[str, str], mode: str
) -> None:
    journal = tmp_path / "mail.db"
    effects = tmp_path / "effects.jsonl"
    # Before the save, one call was already done through the proxy.
    with effects_proxy(str(journal), tmp_path) as proxy:
        proxy.initialize()
        assert "result" in proxy.call("send_email", {"to": "ann", "subject": "Your invoice"})
        assert proxy.close() == 0
    with anyio.fail_after(60):
        async with session(repo, args=["--journal", str(journal)]) as client:
            saved = await client.call_tool("save_session_checkpoint", SAVE)
    assert not saved.is_error, text_of(saved)

    _crash_mid_call(journal, tmp_path)
    assert done_count(effects, "send_email") == 4  # ann, bob, carol and dan: dan's mail went out

    with anyio.fail_after(60):
        async with session(repo, args=["--journal", str(journal)], mode=mode) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
        async with session(repo) as client:  # the same project, no journal configured
            plain = await client.call_tool("load_session_checkpoint", {})

    brief = text_of(loaded)
    before, _, section = brief.partition(f"\n\n{TITLE}\n")
    assert before == text_of(plain)  # nothing else in the brief changes
    resolve = f"checkpoint journal resolve --journal {journal} 4"  # the journal's default workflow goes unsaid
    assert "### ⚠ In doubt: do not redo before it is resolved" in section
    assert '- #4 `send_email` `{"to":"dan","subject":"Your invoice"}` — started ' in section
    assert f"`{resolve} --completed --result-file RESULT.json`" in section
    assert f"`{resolve} --failed --message 'what happened'`" in section
    assert f"`{resolve} --release`" in section
    assert "Do not call them again" in section
    done = section.split("### Done since the checkpoint")[1]
    assert "- #2–#3 `send_email` ×2 ✓ " in done
    assert '`{"to":"bob","subject":"Your invoice"}`, `{"to":"carol","subject":"Your invoice"}`' in done
    assert "ann" not in done
    assert "Before the checkpoint: 1 completed, 0 failed." in section

    data: dict[str, Any] = loaded.structured_content or {}
    (entry,) = data["journals"]
    assert entry["journal"] == str(journal)
    assert entry["workflow"] == str(journal)
    assert entry["since"] == "sequence"
    (doubt,) = entry["inDoubt"]
    assert (doubt["seq"], doubt["tool"], doubt["state"]) == (4, "send_email", "PENDING")
    assert doubt["arguments"] == '{"to":"dan","subject":"Your invoice"}'
    assert doubt["resolve"]["completed"] == f"{resolve} --completed --result-file RESULT.json"
    assert entry["completedSince"]["total"] == 2
    assert entry["completedSince"]["byTool"] == {"send_email": 2}
    assert [c["seq"] for c in entry["completedSince"]["calls"]] == [2, 3]
    assert entry["before"] == {"completed": 1, "failed": 0}
    assert entry["inFlight"] == []

    hooked = _brief_hook(repo, hermetic_git, "--journal", str(journal))
    assert hooked == brief
    assert f"`{resolve} --completed --result-file RESULT.json`" in hooked
    assert read_effects(effects)[-1]["tool"] == "send_email"
