"""The approval docs say what the code does: the keys and commands they name exist, their examples load, and both
tell an agent's operator to deny it `checkpoint journal approve`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click

from checkpoint_mcp.cli import main
from checkpoint_mcp.intercept.policy import Approve, parse_policy

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
POLICIES = (ROOT / "docs" / "policies.md").read_text(encoding="utf-8")
DENY_RULE = "Bash(checkpoint journal approve:*)"


def toml_blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, re.S)


def test_every_toml_example_that_sets_approve_loads_with_the_proxys_own_checks() -> None:
    examples = [block for block in toml_blocks(README) + toml_blocks(POLICIES) if "\napprove = " in block]
    assert len(examples) >= 3
    for block in examples:
        policy = parse_policy(tomllib.loads(block), "example.toml")
        assert any(rule.approve is Approve.OPERATOR for rule in policy.exact.values())


def test_the_commands_and_keys_the_docs_name_exist() -> None:
    journal = main.commands["journal"]
    assert isinstance(journal, click.Group)
    approve = journal.commands["approve"]
    assert {opt for param in approve.params for opt in param.opts} >= {"--deny", "--reason", "--journal"}
    assert "approvals" in journal.commands
    for text in (README, POLICIES):
        assert "checkpoint journal approvals" in text
        assert "approval_expires" in text
        assert DENY_RULE in text, "the docs must say how to keep an agent from approving its own calls"
    assert "## Approvals" in POLICIES
