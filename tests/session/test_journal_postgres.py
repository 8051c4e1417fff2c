"""A PostgreSQL journal found in the project's .mcp.json: the session server saves its position, and a new
session's brief names the in-doubt call and the calls done since, with no password anywhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from checkpoint_mcp.journal import without_password
from checkpoint_mcp.session import service
from checkpoint_mcp.session.effects import TITLE
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource
from pgserver import PASSWORD

from .conftest import SessionFactory
from .helpers import journal_calls, text_of
from support import checkpoint_argv

pytestmark = pytest.mark.anyio


async def test_a_postgres_journal_in_mcp_json_is_read_without_any_other_configuration(
    repo: Path, pg_url: str, session: SessionFactory, hermetic_git: dict[str, str]
) -> None:
    assert PASSWORD in pg_url
    journal_calls(pg_url, "order-1042", [("send_email", {"to": "ann"}, "COMPLETED")])
    server = {
        "command": "checkpoint",
        "args": ["--journal", pg_url, "--workflow-id", "order-1042", "--upstream-cmd", "x"],
    }
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"mailer": server}}))
    with anyio.fail_after(60):
        async with session(repo) as client:
            saved = await client.call_tool("save_session_checkpoint", {"goal": "Ship order 1042"})
    assert not saved.is_error, text_of(saved)
    stored = json.loads((repo / ".claude-checkpoint").read_text())
    (position,) = stored["journals"]
    assert (position["location"], position["workflow"], position["lastSeq"]) == (
        without_password(pg_url),
        "order-1042",
        1,
    )
    journal_calls(
        pg_url, "order-1042", [("send_email", {"to": "bob"}, "COMPLETED"), ("charge_card", {"cents": 4200}, "PENDING")]
    )

    done = subprocess.run(
        checkpoint_argv("brief"),
        cwd=repo,
        env={**os.environ, **hermetic_git, "CLAUDE_PROJECT_DIR": str(repo)},  # PYTHONPATH too: this tree
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    section = done.stdout.split(f"\n\n{TITLE}\n")[1]
    assert '- #3 `charge_card` `{"cents":4200}` — started ' in section
    assert f"checkpoint journal resolve --journal {without_password(pg_url)} order-1042 3 --completed" in section
    assert '- #2 `send_email` `{"to":"bob"}` ✓ ' in section
    assert "Before the checkpoint: 1 completed, 0 failed." in section
    assert PASSWORD not in done.stdout
    assert PASSWORD not in (repo / ".claude-checkpoint").read_text()


def test_an_unreachable_postgres_journal_is_a_warning(repo: Path, hermetic_git: dict[str, str]) -> None:
    service.save(SaveRequest(goal="Ship order 1042"), ProjectRoot(str(repo), RootSource.ARGUMENT))

    done = subprocess.run(
        checkpoint_argv("brief", "--journal", f"postgresql://nobody:{PASSWORD}@127.0.0.1:1/none"),
        cwd=repo,
        env={**os.environ, **hermetic_git, "CLAUDE_PROJECT_DIR": str(repo)},  # PYTHONPATH too: this tree
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "> ⚠ Journal postgresql://nobody@127.0.0.1:1/none could not be read" in done.stdout
    assert PASSWORD not in done.stdout


def test_without_a_checkpoint_the_brief_reads_a_postgres_workflow_from_its_start(
    repo: Path, pg_url: str, hermetic_git: dict[str, str]
) -> None:
    journal_calls(pg_url, "order-7", [("send_email", {"to": "ann"}, "COMPLETED"), ("charge_card", {}, "PENDING")])
    done = subprocess.run(
        checkpoint_argv("brief", "--journal", pg_url, "--workflow-id", "order-7"),
        cwd=repo,
        env={**os.environ, **hermetic_git, "CLAUDE_PROJECT_DIR": str(repo)},  # PYTHONPATH too: this tree
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Resuming without a session checkpoint")
    section = done.stdout.split(f"\n\n{TITLE}\n")[1]
    assert "- #2 `charge_card` `{}` — started " in section
    assert '- #1 `send_email` `{"to":"ann"}` ✓ ' in section.split("### Done so far")[1]
    assert PASSWORD not in done.stdout
