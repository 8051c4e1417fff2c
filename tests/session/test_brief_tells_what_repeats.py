"""The resume brief tells the truth and stays short (issues 36, 42): a call that ended in a tool error is listed as
failed (the server reported an error; it may still have acted), never as done nor as safe; calls whose repeats their tool policy lets run (clicks, checkouts) are
counted on one line per tool and never push the e-mail out; calls a limit refused are named. Through a real proxy,
a real SQLite journal and the real `checkpoint brief` command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import ProxyProcess, checkpoint_argv, server_cmd

POLICY = """\
[tools.send_email]
repeat = "refuse"
within_session = "run"
limit = { calls = 1, per = "1h" }
[tools.tool_error]
repeat = "refuse"
[tools.send_quiet]
repeat = "allow"
"""


def test_the_brief_lists_the_mail_as_done_the_tool_error_as_failed_and_counts_the_clicks(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    (tmp_path / "policy.toml").write_text(POLICY, encoding="utf-8")
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    with ProxyProcess(
        *argv, "--policy", str(tmp_path / "policy.toml"), env={"EFFECTS_FILE": str(tmp_path / "e.jsonl")}
    ) as p:
        p.initialize()
        assert "result" in p.call("send_email", {"to": "bob", "subject": "Invoice"})
        for n in range(60):
            assert "result" in p.call("send_quiet", {"click": n % 3})
        assert p.call("tool_error", {"reason": "SMTP 451 try again later: nothing was sent"})["result"]["isError"]
        assert "error" in p.call("send_email", {"to": "carol", "subject": "Other"})  # over its limit
        assert p.close() == 0, p.stderr
    done = subprocess.run(
        checkpoint_argv("brief", "--project-root", str(tmp_path), "--journal", journal, "--workflow-id", "wf"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    brief = done.stdout
    finished = brief.split("these already happened, do not redo them")[1].split("###")[0]
    assert '`send_email` `{"to":"bob","subject":"Invoice"}` ✓' in finished
    assert "send_quiet" not in finished
    assert "tool_error" not in finished
    failed = brief.split("### Failed: the server reported an error; it may still have acted")[1]
    assert "`tool_error`" in failed.split("###")[0]
    assert "✗ failed (tool error)" in failed.split("###")[0]
    assert "safe" not in brief, brief
    ran = brief.split("### Also ran, and their repeats run")[1].split("###")[0]
    assert "- `send_quiet` ×60 (#2…#61)" in ran
    refused = brief.split("### Refused by a limit or budget of the tool policy: these did not run")[1]
    assert "- `send_email` refused by its limit 1×" in refused
    assert "the next may run after " in refused
    assert len(brief) < 3000, brief  # sixty clicks take one line


SUB_RULED = """\
[tools.send_email]
repeat = "allow"
[[tools.send_email.when]]
name = "to-bob"
pointer = "/to"
regex = "^bob"
repeat = "refuse"
"""


def test_a_call_a_sub_rule_decided_is_listed_with_the_rule_and_the_others_are_counted(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    (tmp_path / "policy.toml").write_text(SUB_RULED, encoding="utf-8")
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    with ProxyProcess(
        *argv, "--policy", str(tmp_path / "policy.toml"), env={"EFFECTS_FILE": str(tmp_path / "e.jsonl")}
    ) as p:
        p.initialize()
        for to in ("alice", "carol", "bob"):
            assert "result" in p.call("send_email", {"to": to, "subject": "Invoice"})
        assert p.close() == 0, p.stderr
    done = subprocess.run(
        checkpoint_argv("brief", "--project-root", str(tmp_path), "--journal", journal, "--workflow-id", "wf"),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    finished = done.stdout.split("these already happened, do not redo them")[1].split("###")[0]
    assert '`{"to":"bob","subject":"Invoice"}` ✓' in finished
    assert "(policy rule `tools.send_email.when.to-bob`)" in finished
    assert "alice" not in finished
    ran = done.stdout.split("### Also ran, and their repeats run")[1].split("###")[0]
    assert "- `send_email` ×2 (#1…#2)" in ran
