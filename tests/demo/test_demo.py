"""`checkpoint demo` (the README's first command) shows replay, a divergence refused and an in-doubt call."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import checkpoint_argv


def test_the_demo_crashes_restarts_reconciles_and_runs_no_side_effect_twice(tmp_path: Path) -> None:
    done = subprocess.run(
        checkpoint_argv("demo", "--workdir", str(tmp_path)), capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "the machine crashed mid-call" in out
    assert "replayed from the journal, mail server not called" in out
    assert "refused, divergence: arguments.cents: 4200 → 9900" in out
    assert "refused, in doubt" in out
    assert "checkpoint journal resolve" in out
    assert "{'" not in out  # the in-doubt error's commands are shown as commands, not as a Python dict
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("$ checkpoint journal resolve")]
    assert len(commands) == 4  # completed, failed, release, and the operator's own in act 3
    for command in commands:
        assert command.count(str(tmp_path / "journal.db")) == 1  # the default workflow is not repeated
    assert "resolved as completed (was PENDING)" in out
    act3 = out.split("Act 3")[1]
    assert act3.count("replayed from the journal") == 4
    outbox = (tmp_path / "outbox.txt").read_text().splitlines()
    assert outbox == [
        "to=alice@example.com subject='Your order has shipped'",
        "to=bob@example.com subject='Your invoice'",
        "to=carol@example.com subject='Thanks for your feedback'",
    ]
    assert (tmp_path / "ledger.txt").read_text().splitlines() == ["customer=alice cents=4200"]
