"""The journal holds every call's arguments and results, so a real proxy creates it owner-only whatever the umask:
the SQLite file, its -wal and -shm, and the ownership and presence locks 0600, their folder 0700. An existing journal open to
others is warned about on stderr, never changed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState

from support import ProxyProcess, journal_states, server_cmd


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def effects_proxy_under(umask: int, journal: Path, tmp_path: Path) -> ProxyProcess:
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    return ProxyProcess(
        "--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(journal), env=env, umask=umask
    )


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask 022", "umask 000"])
def test_a_proxy_creates_its_journal_and_everything_beside_it_owner_only(tmp_path: Path, umask: int) -> None:
    journal = tmp_path / "j.db"
    with effects_proxy_under(umask, journal, tmp_path) as proxy:
        proxy.initialize()
        assert "result" in proxy.call("send_email", {"to": "a@example.com"}, seq=1)
        # checked while the proxy lives: SQLite removes -wal and -shm when the last connection closes
        made = [journal, Path(f"{journal}-wal"), Path(f"{journal}-shm"), Path(f"{journal}.owners")]
        locks = list(Path(f"{journal}.owners").iterdir())
        assert {str(p): mode(p) for p in made + locks} == {
            **{str(p): 0o600 for p in made[:3] + locks},
            str(made[3]): 0o700,
        }
        assert len(locks) == 2  # the workflow's, and this proxy's presence (docs/sessions.md)
        assert proxy.close() == 0
    assert len(list(Path(f"{journal}.owners").iterdir())) == 1  # the presence goes with its proxy
    assert journal_states(str(journal), str(journal)) == {1: CallState.COMPLETED}
    assert "chmod" not in proxy.stderr


def test_an_existing_journal_open_to_others_is_warned_about_and_still_used_unchanged(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    with effects_proxy_under(0o022, journal, tmp_path) as first:
        first.initialize()
        first.call("send_email", {"to": "a@example.com"}, seq=1)
        assert first.close() == 0
    journal.chmod(0o644)  # as an older Checkpoint (or the user, on purpose) left it

    with effects_proxy_under(0o022, journal, tmp_path) as second:
        second.initialize()
        replayed = second.call("send_email", {"to": "a@example.com"}, seq=1)
        assert replayed["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert second.close() == 0
    warnings = [line for line in second.stderr.splitlines() if "chmod" in line]
    assert warnings == [
        f"checkpoint: WARNING: journal {journal} is open to other users (mode 0644) and holds every call's "
        f"arguments and results; to make it owner-only: chmod 600 {journal}"
    ]
    assert mode(journal) == 0o644


def test_a_journal_created_under_a_umask_that_takes_the_owners_bits_is_still_usable(tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    with effects_proxy_under(0o277, journal, tmp_path) as proxy:
        proxy.initialize()
        assert "result" in proxy.call("send_email", {"to": "a@example.com"}, seq=1)
        assert mode(journal) == 0o600
        assert mode(Path(f"{journal}.owners")) == 0o700
        assert proxy.close() == 0
    [lock] = Path(f"{journal}.owners").iterdir()
    assert (mode(journal), mode(lock)) == (0o600, 0o600)
    with effects_proxy_under(0o277, journal, tmp_path) as again:  # the lock opens for writing again
        again.initialize()
        assert again.call("send_email", {"to": "a@example.com"}, seq=1)["result"]["_meta"]["checkpoint/journal"][
            "replayed"
        ]
        assert again.close() == 0
