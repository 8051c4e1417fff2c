"""Two people approving one request at once, on PostgreSQL (read committed: both can read it pending): one
`checkpoint journal approve` wins, the other is told who decided first, and the chain records one decision."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from checkpoint_mcp.journal import default_workflow_id, open_journal
from checkpoint_mcp.refusals import APPROVAL_REQUIRED

from support import ProxyProcess, checkpoint_argv, server_cmd

WAIT = 20.0  # seconds the test waits for both commands to queue on the row


def waiting_on_locks(url: str) -> int:
    """How many sessions of this database wait on a lock now."""
    watcher = open_journal(url)
    try:
        with watcher.transaction():
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
        return int(row[0])
    finally:
        watcher.close()


def test_two_approvals_of_one_request_at_once_one_wins_the_other_is_refused(pg_url: str, tmp_path: Path) -> None:
    rules = tmp_path / "policy.toml"
    rules.write_text('[tools.send_email]\napprove = "operator"\n', encoding="utf-8")
    argv = ["--upstream-cmd", server_cmd("effects_server.py"), "--journal", pg_url, "--policy", str(rules)]
    with ProxyProcess(*argv, env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}) as proxy:
        proxy.initialize()
        asked = proxy.call("send_email", {"to": "bob@example.com"})
        assert proxy.close() == 0, proxy.stderr
    assert asked["error"]["code"] == APPROVAL_REQUIRED
    number = asked["error"]["data"]["approval"]

    holder = open_journal(pg_url)
    try:
        with holder.transaction():  # hold the row so that both commands read it pending, then queue to change it
            holder.execute("SELECT id FROM approvals WHERE id = ? FOR UPDATE", (number,))
            commands = [
                subprocess.Popen(
                    checkpoint_argv("journal", "approve", "--journal", pg_url, str(number), *extra),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for extra in ((), ("--deny", "--reason", "no"))
            ]
            deadline = time.monotonic() + WAIT
            while waiting_on_locks(pg_url) < 2:
                assert time.monotonic() < deadline, "the two commands never both waited on the request's row"
                assert all(c.poll() is None for c in commands), [c.communicate() for c in commands]
                time.sleep(0.05)  # polling with a deadline: the commands start at their own pace
        results = [c.communicate(timeout=30) for c in commands]
    finally:
        holder.close()

    codes = sorted(c.returncode for c in commands)
    assert codes == [0, 1], results
    loser = next(err for c, (_, err) in zip(commands, results, strict=True) if c.returncode == 1)
    assert f"approval #{number} was " in loser
    assert "meanwhile: it cannot be decided again" in loser
    journal = open_journal(pg_url)
    try:
        decided = journal.approvals.approval(number)
        workflow = default_workflow_id(pg_url)
        actions = [json.loads(link.detail)["action"] for link in journal.links(workflow) if link.kind == "approval"]
    finally:
        journal.close()
    assert actions.count("granted") + actions.count("denied") == 1
    assert decided is not None
    assert decided.state.value == actions[-1]
