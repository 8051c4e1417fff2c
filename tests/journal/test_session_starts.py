"""Session starts as the hooks record them (``journal/session_starts.py``): a journal that cannot take one is
skipped with a reason, and the reason never holds the journal's password, even where the database's own error
quotes it."""

from __future__ import annotations

from pathlib import Path

from checkpoint_mcp.journal import open_journal, session_starts
from pgserver import PASSWORD, PgServer


def test_a_postgres_error_that_quotes_the_password_is_told_without_it(pg_server: PgServer) -> None:
    # The database is named like the password, so PostgreSQL's own message ("database … does not exist") holds it.
    why = session_starts.record(pg_server.url(database=PASSWORD), "startup", {}, ("1:2",))
    assert why is not None
    assert 'database "***" does not exist' in why, why
    assert PASSWORD not in why


def test_a_start_is_recorded_under_the_client_processes_its_hook_ran_under(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    open_journal(journal).close()
    assert session_starts.record(journal, "compact", {"session": "abc"}, ("10:20", "30:40")) is None
    opened = open_journal(journal)
    try:
        for client in ("10:20", "30:40"):  # the hook's parent or grandparent: either may be the client
            assert opened.session_starts(client).known
        assert not opened.session_starts("99:1").known
        assert opened.session_starts("99:1").newest is None
        assert session_starts.record(journal, "bogus", {}, ()) is None  # no client known: every session's
        everyone = opened.session_starts("99:1")
        assert everyone.newest is not None
        assert not everyone.known
    finally:
        opened.close()


def test_the_first_session_start_of_a_project_makes_the_journal_a_proxy_would_make(tmp_path: Path) -> None:
    """The first session of a project starts its hook before any proxy made the journal: the start is recorded all
    the same (else that session's own repeats would be asked about); a folder that is not there is not made."""
    journal = str(tmp_path / "j.db")
    assert session_starts.record(journal, "startup", {}, ("5:6",)) is None
    opened = open_journal(journal, create=False)
    try:
        assert opened.session_starts("5:6").known
    finally:
        opened.close()
    why = session_starts.record(str(tmp_path / "missing" / "j.db"), "startup", {}, ("5:6",))
    assert why == "its folder does not exist"
    assert not (tmp_path / "missing").exists()
