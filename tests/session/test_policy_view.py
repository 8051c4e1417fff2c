"""The brief's reading of a tool policy file: which tool's in-doubt calls settle themselves, chosen as the proxy
chooses a tool's table (an exact name over globs, then more literal characters, fewer wildcards, first written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint_mcp.intercept.policy import load_policy
from checkpoint_mcp.session import policy_view

POLICY = """
[default]
repeat = "refuse"

[tools."send_*"]
probe = { tool = "list_outbox", arguments = { to = "/to" }, happened_if = { pointer = "/count", equals = 1 } }

[tools."send_e*"]
repeat = "replay"

[tools.send_quiet]
journal = false

[tools.git_add]
idempotent = true

[tools."charge_[ck]ard"]
idempotency = { argument = "idempotency_key" }

[tools."*"]
idempotency = { header = "Idempotency-Key" }

[tools."?*"]
repeat = "allow"
"""


@pytest.mark.parametrize(
    ("tool", "how"),
    [
        ("send_sms", "probe list_outbox"),  # send_* is the only glob with 5 literals that matches
        ("send_email", None),  # send_e* has more literal characters, and declares neither
        ("send_quiet", None),  # an exact name wins over every glob
        ("charge_card", "idempotency key"),
        ("refund", "idempotency key"),  # * and ?* tie on literals: * has fewer wildcards
        ("git_add", "idempotent"),  # the server's promise: re-sent as is
    ],
)
def test_the_winning_table_says_how_an_in_doubt_call_settles(tmp_path: Path, tool: str, how: str | None) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    settlers = policy_view.read(str(path))
    assert isinstance(settlers, policy_view.Settlers)
    assert settlers.how(tool) == how
    rule = load_policy(path).rule_for(tool)  # the proxy's own reading agrees
    proxy = "idempotent" if rule.idempotent else "idempotency key" if rule.idempotency else None
    assert (f"probe {rule.probe.tool}" if rule.probe else proxy) == how


def test_a_file_that_cannot_be_read_is_a_reason_not_a_failure(tmp_path: Path) -> None:
    missing = policy_view.read(str(tmp_path / "none.toml"))
    assert isinstance(missing, str)
    assert "none.toml cannot be read" in missing
    (tmp_path / "bad.toml").write_text("[tools\n")
    assert "is not valid TOML" in str(policy_view.read(str(tmp_path / "bad.toml")))
