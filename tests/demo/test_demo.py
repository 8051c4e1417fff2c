"""`checkpoint demo` (the README's first command): crashes mid-call settle themselves under a tool policy, and a
repeat from an agent that names no sequence is caught, with no operator step."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import checkpoint_argv


def test_the_demo_crashes_twice_settles_both_in_doubt_calls_itself_and_catches_a_repeat(tmp_path: Path) -> None:
    done = subprocess.run(
        checkpoint_argv("demo", "--workdir", str(tmp_path)), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("the machine crashed mid-call") == 2
    act2 = out.split("Act 2")[1].split("Act 3")[0]
    assert "step 1: send_email(to='alice@example.com', subject='Your order has shipped') → replayed" in act2
    assert "step 2: charge_card(customer='alice', cents=4200) → charged alice 42.00 EUR" in act2
    act3 = out.split("Act 3")[1].split("Act 4")[0]
    assert "✓ it was in doubt; list_outbox shows it went out, so it is recorded as done, not sent again" in act3
    assert "step 4: send_email(to='carol@example.com', subject='Thanks for your feedback') → sent" in act3
    act4 = out.split("Act 4")[1].split("Result:")[0]
    assert "✋ caught: the same e-mail went out as call #3; not sent again." in act4
    assert "checkpoint journal resolve" not in out  # no operator step
    assert "refused, in doubt" not in out
    outbox = (tmp_path / "outbox.txt").read_text().splitlines()
    assert outbox == [
        "to=alice@example.com subject='Your order has shipped'",
        "to=bob@example.com subject='Your invoice'",
        "to=carol@example.com subject='Thanks for your feedback'",
    ]
    [charge] = (tmp_path / "ledger.txt").read_text().splitlines()  # charged once, though sent twice
    assert charge.startswith("customer=alice cents=4200 key=checkpoint-")
