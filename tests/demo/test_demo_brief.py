"""`checkpoint demo` ends with the resume brief a fresh session gets: both halves, and what settled itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import checkpoint_argv


def test_the_demo_ends_with_the_brief_that_joins_the_goal_and_the_calls_the_policy_settled(tmp_path: Path) -> None:
    done = subprocess.run(
        checkpoint_argv("demo", "--workdir", str(tmp_path)), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    epilogue = done.stdout.split("Epilogue")[1]
    assert "# Resuming: " in epilogue
    assert "Ship order 1042: tell Alice, charge her card, invoice Bob, thank Carol" in epilogue
    assert "3. send_email(to='bob@example.com', subject='Your invoice')" in epilogue
    assert "- No changes since the checkpoint" in epilogue
    assert "### ⚠ In doubt" not in epilogue
    since = epilogue.split("### Done since the checkpoint")[1].split("### Settled automatically")[0]
    assert '- #1 `send_email` `{"to":"alice@example.com","subject":"Your order has shipped"}` ✓' in since
    assert '- #2 `charge_card` `{"customer":"alice","cents":4200}` ✓' in since
    settled = epilogue.split("### Settled automatically by the tool policy (no operator step)")[1]
    assert "- #2 `charge_card` — sent again under its idempotency key" in settled
    assert "- #3 `send_email` — it had run (the read-only tool list_outbox showed it)" in settled
    assert (tmp_path / ".claude-checkpoint").exists()
    assert (tmp_path / ".git").is_dir()
