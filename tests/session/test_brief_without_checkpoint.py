"""A project set up by `checkpoint init` and resumed before anyone saved a session checkpoint (the usual case):
the brief still tells what the journal knows, and which in-doubt call its tool policy would settle.

Real processes throughout: a git repository, `checkpoint init`, the wrapped entry started as Claude Code starts it
(`checkpoint` journaling to SQLite in front of the effects server), killed mid-call by a debug trigger,
`checkpoint brief --hook` as Claude Code's SessionStart hook runs it, and `checkpoint session` over stdio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from checkpoint_mcp.session.effects import TITLE

from .conftest import Git, SessionFactory
from .helpers import text_of
from support import SERVERS, ProxyProcess, checkpoint_argv, done_count, journal_calls

pytestmark = pytest.mark.anyio

POLICY = '[tools.send_quiet]\nidempotency = { argument = "idempotency_key" }\n'


def _initialized(repo: Path, tmp_path: Path) -> list[str]:
    """`checkpoint init --policy` on a project with one server, ``mail``; the proxy arguments it wrote."""
    (repo / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"mail": {"command": sys.executable, "args": [str(SERVERS / "effects_server.py")]}}})
    )
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    argv = checkpoint_argv("init", "--project", str(repo), "--policy", str(policy))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    entry = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["mail"]
    assert entry["args"][:2] == ["-m", "checkpoint_mcp"]
    args: list[str] = entry["args"][2:]
    return args


def _proxy(args: list[str], tmp_path: Path, repo: Path, trigger: str | None = None) -> ProxyProcess:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    if trigger:
        env["CHECKPOINT_DEBUG_TRIGGER"] = trigger
    return ProxyProcess(*args, env=env, cwd=repo)


def _crash_mid_call(args: list[str], tmp_path: Path, repo: Path, calls: list[tuple[str, dict[str, str]]]) -> None:
    """All but the last call complete; the last reaches the upstream, and the proxy dies before journaling it."""
    with _proxy(args, tmp_path, repo, trigger=f"after_upstream_reply@{len(calls)}") as proxy:
        proxy.initialize()
        for tool, arguments in calls[:-1]:
            assert "result" in proxy.call(tool, arguments)
        tool, arguments = calls[-1]
        proxy.send(
            {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        )
        assert proxy.wait() != 0


def _brief_hook(repo: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        checkpoint_argv("brief", "--hook"),
        cwd=repo,
        env={**os.environ, **env, "CLAUDE_PROJECT_DIR": str(repo)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context: str = document["hookSpecificOutput"]["additionalContext"]
    return context


async def test_without_a_session_checkpoint_the_brief_names_the_calls_done_and_in_doubt(
    repo: Path, tmp_path: Path, session: SessionFactory, hermetic_git: dict[str, str]
) -> None:
    args = _initialized(repo, tmp_path)
    # The first proxy: one mail goes out, the second reaches the upstream and the proxy dies before its answer.
    _crash_mid_call(args, tmp_path, repo, [("send_email", {"to": "bob"}), ("send_email", {"to": "dan"})])
    # The next proxy: a call of a tool whose policy declares an idempotency key is cut off the same way (at the
    # sequence after those the first proxy held ahead when it died, docs/sessions.md).
    _crash_mid_call(args, tmp_path, repo, [("send_quiet", {"to": "eve"})])
    effects = tmp_path / "effects.jsonl"
    assert (done_count(effects, "send_email"), done_count(effects, "send_quiet")) == (2, 1)
    assert not (repo / ".claude-checkpoint").exists()

    context = _brief_hook(repo, hermetic_git)
    assert "nothing to resume" not in context
    assert context.startswith(f"# Resuming without a session checkpoint (none at {repo / '.claude-checkpoint'})")
    _, _, section = context.partition(f"\n\n{TITLE}\n")
    assert section, context
    doubt = section.split("### ⚠ In doubt: do not redo before it is resolved")[1].split("###")[0]
    assert '- #2 `send_email` `{"to":"dan"}` — started ' in doubt
    assert "send_quiet" not in doubt
    resolve = f"checkpoint journal resolve --journal {repo / '.checkpoint' / 'journal.db'} mail 2"
    assert f"`{resolve} --release`" in doubt
    safe = section.split("### In doubt, settled by the tool policy when sent again")[1].split("###")[0]
    [quiet] = [
        row.seq for row in journal_calls(str(repo / ".checkpoint" / "journal.db"), "mail") if row.tool == "send_quiet"
    ]
    assert f'- #{quiet} `send_quiet` `{{"to":"eve"}}` — started ' in safe
    assert "sending it again is safe: it will be re-sent under its idempotency key" in safe
    done = section.split("### Done so far, as the journal records it (newest last)")[1]
    assert '- #1 `send_email` `{"to":"bob"}` ✓ ' in done
    assert "Before the checkpoint" not in section

    with anyio.fail_after(60):
        async with session(repo, env={"CLAUDE_PROJECT_DIR": str(repo)}) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
            full = await client.call_tool("load_session_checkpoint", {"format": "full"})
    assert not loaded.is_error
    assert text_of(loaded) == context
    data: dict[str, Any] = loaded.structured_content or {}
    assert data["found"] is False
    (entry,) = data["journals"]
    assert entry["workflow"] == "mail"
    assert [(c["seq"], c["settlesWhenSentAgain"]) for c in entry["inDoubt"]] == [(2, None), (quiet, "idempotency key")]
    assert [c["seq"] for c in entry["completedSince"]["calls"]] == [1]
    document = json.loads(text_of(full))
    assert document["checkpoint"] is None
    assert [c["seq"] for c in document["journals"][0]["inDoubt"]] == [2, quiet]


async def test_with_an_empty_journal_and_no_checkpoint_there_is_nothing_to_resume(
    repo: Path, tmp_path: Path, session: SessionFactory, hermetic_git: dict[str, str]
) -> None:
    args = _initialized(repo, tmp_path)
    with _proxy(args, tmp_path, repo) as proxy:
        info = proxy.initialize()
        assert info["result"]["serverInfo"]["name"] == "mail"  # init gave the proxy the entry's own name
        assert proxy.close() == 0
    assert (repo / ".checkpoint" / "journal.db").exists()

    context = _brief_hook(repo, hermetic_git)
    assert context == f"No checkpoint at {repo / '.claude-checkpoint'}: nothing to resume."
    with anyio.fail_after(60):
        async with session(repo, env={"CLAUDE_PROJECT_DIR": str(repo)}) as client:
            loaded = await client.call_tool("load_session_checkpoint", {})
    assert text_of(loaded) == context
    assert (loaded.structured_content or {})["found"] is False


async def test_the_files_init_wrote_are_not_files_touched_until_someone_edits_them(
    repo: Path, tmp_path: Path, session: SessionFactory, git: Git
) -> None:
    (repo / ".gitignore").unlink()  # init adds the checkpoint's own line to a new one
    git(repo, "commit", "-qam", "no ignore file")
    _initialized(repo, tmp_path)
    (repo / "app.py").write_text("print('work')\n")
    save = {"goal": "Ship it", "summary": "Started"}
    with anyio.fail_after(60):
        async with session(repo, env={"CLAUDE_PROJECT_DIR": str(repo)}) as client:
            first = await client.call_tool("save_session_checkpoint", save)
            assert not first.is_error, text_of(first)
            brief = text_of(await client.call_tool("load_session_checkpoint", {}))
            with (repo / ".mcp.json").open("a") as handle:
                handle.write("\n")  # edited by hand since: the user's work again
            second = await client.call_tool("save_session_checkpoint", save)
            assert not second.is_error, text_of(second)
            again = text_of(await client.call_tool("load_session_checkpoint", {}))
    touched = brief.split("## Files touched")[1].split("##")[0]
    assert "app.py (??)" in touched
    for own in (".mcp.json", ".claude", ".gitignore", ".checkpoint"):
        assert own not in touched
    assert "not git-ignored" not in text_of(first)  # init ignored the checkpoint file
    assert ".mcp.json (??)" in again.split("## Files touched")[1].split("##")[0]
