"""The side-effects section keeps to its budget inside the brief's cap, says what it cut, and is absent when
the journals have nothing to say (the brief is then byte for byte what it was without them)."""

from __future__ import annotations

from pathlib import Path

from checkpoint_mcp.session import journals, service
from checkpoint_mcp.session.effects import EFFECTS_MAX_CHARS, TITLE
from checkpoint_mcp.session.journals import JournalSpec
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.render import BRIEF_MAX_CHARS
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .helpers import journal_calls


def _setup(repo: Path, journal: Path) -> journals.Setup:
    return journals.configured([JournalSpec(str(journal))], root=str(repo), environ={}, cwd=str(repo))


def _save(repo: Path, setup: journals.Setup, **fields: object) -> ProjectRoot:
    root = ProjectRoot(str(repo), RootSource.ARGUMENT)
    request = SaveRequest(goal="Send every invoice", next_steps=("Send the invoices",), **fields)  # type: ignore[arg-type]
    service.save(request, root, setup=setup)
    return root


def test_thousands_of_calls_since_the_save_still_give_a_brief_under_the_cap_with_a_cut_notice(
    repo: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "j.db"
    journal_calls(str(journal), str(journal), [("send_email", {"to": "first"}, "COMPLETED")])
    setup = _setup(repo, journal)
    root = _save(
        repo,
        setup,
        summary="Where things stand, at length. " * 120,
        decisions=tuple(f"Decision {i}: " + "a reason " * 50 for i in range(20)),
    )
    calls = [(("send_email", "charge_card")[i % 2], {"to": f"user{i}@example.com"}, "COMPLETED") for i in range(5000)]
    calls += [("send_email", {"to": f"doubt{i}@example.com", "subject": "x" * 100}, "PENDING") for i in range(30)]
    journal_calls(str(journal), str(journal), calls)

    brief = service.load(root, setup=setup).text

    assert len(brief) < BRIEF_MAX_CHARS
    section = brief.split(f"\n\n{TITLE}\n")[1].split("\n\n_Brief cut")[0]
    assert len(TITLE) + 1 + len(section) <= EFFECTS_MAX_CHARS
    assert section.index("### ⚠ In doubt") < section.index("### Done since the checkpoint")
    assert "- #5002 `send_email`" in section  # the first in-doubt call is never cut
    assert "_Side effects cut to stay within their 4,000 characters of the brief: " in section
    assert "of 5,000 calls done since shown" in section
    assert "of 30 in-doubt calls shown" in section
    assert f"`checkpoint journal show --journal {journal} {journal}`" in section
    assert "earlier call(s) not shown: " in section
    assert "- #5001 `charge_card`" in section  # the newest call done is kept
    assert brief.rstrip().endswith('Call load_session_checkpoint with format "full" for everything._')


def test_a_journal_with_nothing_new_since_the_save_leaves_the_brief_as_it_was(repo: Path, tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    journal_calls(str(journal), str(journal), [("send_email", {"to": "ann"}, "COMPLETED")])
    setup = _setup(repo, journal)
    root = _save(repo, setup)

    with_journal = service.load(root, setup=setup)
    without = service.load(root)

    assert with_journal.text == without.text
    assert TITLE not in with_journal.text
    assert with_journal.journals[0].digest is not None
    assert with_journal.journals[0].digest.before == {"completed": 1, "failed": 0}
