"""What `checkpoint init` prints for a project with the twelve servers people install most (each at its pinned
version) and two of ours: a screenful, one row per server saying where its tables came from, and the few tools to review;
the policy files' diffs only with --diff (or --dry-run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .entries import run_init
from realservers import SERVERS

OURS = Path(__file__).resolve().parents[1] / "servers"


def mcp_json(tmp_path: Path) -> dict[str, object]:
    servers: dict[str, object] = {server.profile: server.entry(tmp_path) for server in SERVERS}
    servers["desk"] = {"command": sys.executable, "args": [str(OURS / "unannotated_server.py")]}
    servers["mailbox"] = {"command": sys.executable, "args": [str(OURS / "mailbox_server.py")]}
    return {"mcpServers": servers}


@pytest.mark.timeout(240)
def test_init_says_what_it_did_for_fourteen_servers_in_a_screenful_and_the_diffs_only_when_asked(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps(mcp_json(tmp_path), indent=2))

    dry = run_init("--project", str(project), "--dry-run", "--list-timeout", "90")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("\n+++ ") + dry.stdout.startswith("+++ ") >= 14, "--dry-run prints every file's diff"

    done = run_init("--project", str(project), "--list-timeout", "90")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", "no diff without --diff"
    lines = done.stderr.splitlines()
    assert len(lines) <= 30, done.stderr
    assert "warning" not in done.stderr, done.stderr

    rows = {line.split()[0]: line for line in lines if line.startswith("  ") and line.split()[1].isdigit()}
    for server in SERVERS:
        assert server.profile in rows, done.stderr
        assert "reviewed profile " in rows[server.profile], rows[server.profile]
    counts = {name: [int(n) for n in row.split()[1:6]] for name, row in rows.items()}
    assert counts["github"] == [26, 14, 0, 0, 12], "the npm GitHub server has no hints: its profile says what reads"
    assert counts["playwright"] == [25, 7, 0, 18, 0], "a browser's interactions repeat freely"
    assert counts["desktop-commander"] == [26, 14, 0, 12, 0], (
        "its commands repeat; those beyond the machine are sub-rules"
    )
    assert counts["commands"] == [1, 0, 0, 1, 0]
    assert counts["desk"] == [4, 0, 3, 0, 1]
    assert rows["desk"].endswith("hints, names")
    assert counts["mailbox"] == [2, 1, 0, 0, 1]
    assert rows["mailbox"].endswith("hints")

    review = [line for line in lines if line.startswith("review first: ")]
    assert [line.split("'s tools ")[0] for line in review] == ["review first: desk", "review first: mailbox"]
    assert "create_ticket have no hints" in review[0]
    assert "send_email have no hints" in review[1]
    assert any(
        line.startswith("review the guesses: desk's tools get_status, list_items, search_docs") for line in lines
    )

    policies = project / ".checkpoint" / "policies"
    assert len(list(policies.iterdir())) == 14
    assert "--- " not in done.stderr
