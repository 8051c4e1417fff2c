"""`checkpoint demo` ends with the resume brief a fresh session got after the crash in act 1: both halves."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import checkpoint_argv


def test_the_demo_ends_with_the_brief_that_joins_the_goal_and_next_steps_with_the_journal(tmp_path: Path) -> None:
    done = subprocess.run(
        checkpoint_argv("demo", "--workdir", str(tmp_path)), capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    epilogue = done.stdout.split("Epilogue")[1]
    assert "# Resuming: " in epilogue
    assert "Ship order 1042: tell Alice, charge her card, invoice Bob, thank Carol" in epilogue
    assert "3. send_email(to='bob@example.com', subject='Your invoice')" in epilogue
    assert "- No changes since the checkpoint" in epilogue
    doubt = epilogue.split("### ⚠ In doubt")[1].split("### Done since")[0]
    assert '- #3 `send_email` `{"to":"bob@example.com","subject":"Your invoice"}`' in doubt
    journal = tmp_path.resolve() / "journal.db"
    assert f"checkpoint journal resolve --journal {journal} 3 --completed" in doubt  # its default workflow
    since = epilogue.split("### Done since the checkpoint")[1]
    assert '- #1 `send_email` `{"to":"alice@example.com","subject":"Your order has shipped"}` ✓' in since
    assert '- #2 `charge_card` `{"customer":"alice","cents":4200}` ✓' in since
    assert "carol" not in since
    assert (tmp_path / ".claude-checkpoint").exists()
    assert (tmp_path / ".git").is_dir()
