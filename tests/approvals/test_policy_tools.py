"""The approval keys in the policy tooling: `checkpoint policy check` shows who approves each tool's calls and for
how long a grant holds; the policy `init` writes offers ``approve = "operator"`` to destructive tools, commented
out (off by default), and uncommenting it is all it takes."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

from checkpoint_mcp.init.policies import suggest
from checkpoint_mcp.intercept.policy import Approve, parse_policy

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd

POLICY = """
[default]
approve = "operator"
approval_expires = "30m"

[tools.delete_repo]
approve = "elicit"
approval_expires = "2h"

[tools.lookup]
read_only = true

[tools."read_*"]
journal = false
"""
TOOLS = [{"name": "send_email"}, {"name": "delete_repo"}, {"name": "lookup"}, {"name": "read_file"}]
APPROVE_LINE = '# approve = "operator"'


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        checkpoint_argv(*args), input=stdin, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_policy_check_shows_who_approves_each_tool_and_how_long_a_grant_holds(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY, encoding="utf-8")
    rows = {
        row["tool"]: row
        for row in json.loads(run("policy", "check", str(path), "--json", stdin=json.dumps(TOOLS)).stdout)["tools"]
    }
    assert (rows["send_email"]["approve"], rows["send_email"]["approvalExpiresSeconds"]) == ("operator", 1800)
    assert (rows["delete_repo"]["approve"], rows["delete_repo"]["approvalExpiresSeconds"]) == ("elicit", 7200)
    assert rows["lookup"]["approve"] is None, "a read-only table does not inherit [default]'s approve"
    assert rows["read_file"]["approve"] is None, "an unjournaled call is never gated"
    text = run("policy", "check", str(path), stdin=json.dumps(TOOLS)).stdout.splitlines()
    send = text.index(next(line for line in text if line.startswith("send_email")))
    assert text[send + 1].split() == [
        "approve", "=", "operator:", "each", "call", "waits", "for", "a", "person", "(checkpoint", "journal",
        "approve);", "a", "grant", "is", "usable", "once", "within", "30m",
    ]  # fmt: skip
    assert any("approve = elicit: each call waits for the client's user" in line and "2h" in line for line in text)
    assert sum("approve = " in line for line in text) == 2


def test_init_offers_approve_to_destructive_tools_only_commented_out() -> None:
    tools = [
        {"name": "lookup", "annotations": {"readOnlyHint": True}},
        {"name": "set_status", "annotations": {"idempotentHint": True, "destructiveHint": False}},
        {"name": "wipe", "annotations": {"idempotentHint": True, "destructiveHint": True}},
        {"name": "send", "annotations": {"destructiveHint": True}},
        {"name": "no_hints"},
    ]
    text = suggest("mail", tools)
    tables = {block.split("]")[0].split(".")[-1]: block for block in text.split("\n[tools.")[1:]}
    offered = {name for name, block in tables.items() if f"\n{APPROVE_LINE}" in block}
    assert offered == {"wipe", "send", "no_hints"}
    written = parse_policy(tomllib.loads(text), "mail.toml")
    assert all(written.rule_for(tool["name"]).approve is None for tool in tools), "off by default"
    switched = parse_policy(tomllib.loads(text.replace(APPROVE_LINE, APPROVE_LINE[2:])), "mail.toml")
    assert switched.rule_for("send").approve is Approve.OPERATOR
    assert switched.rule_for("wipe").approve is Approve.OPERATOR
    assert switched.rule_for("set_status").approve is None


def test_the_suggested_policy_of_a_real_server_gates_its_destructive_tool_once_uncommented(tmp_path: Path) -> None:
    upstream = server_cmd("effects_server.py")
    written = run("policy", "suggest", "--upstream-cmd", upstream, "--name", "mail").stdout
    assert '[tools.send_email]\nrepeat = "refuse"\nwindow = "24h"\nwithin_session = "run"\n' + APPROVE_LINE in written
    path = tmp_path / "mail.toml"
    path.write_text(written, encoding="utf-8")
    before = json.loads(run("policy", "check", str(path), "--json", "--upstream-cmd", upstream).stdout)["tools"]
    assert all(row["approve"] is None for row in before)
    path.write_text(written.replace(APPROVE_LINE, APPROVE_LINE[2:]), encoding="utf-8")
    after = json.loads(run("policy", "check", str(path), "--json", "--upstream-cmd", upstream).stdout)["tools"]
    gated = {row["tool"] for row in after if row["approve"] == "operator"}
    assert "send_email" in gated
    assert "lookup" not in gated
