"""Which journals a project's brief reads: --journal, CHECKPOINT_JOURNAL, the project's .mcp.json; and a journal
that cannot be read is a warning, never a failed load. Read-only: a brief creates no file and changes no byte."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from checkpoint_mcp.session import journals, service
from checkpoint_mcp.session.effects import TITLE
from checkpoint_mcp.session.journals import Journaled, JournalSpec
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .helpers import FIXTURES, journal_calls
from support import checkpoint_argv


def _brief(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        checkpoint_argv("brief", *args),
        cwd=repo,
        env={**os.environ, **env, "CLAUDE_PROJECT_DIR": str(repo)},  # PYTHONPATH too: this tree's code
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _save(repo: Path, *specs: JournalSpec) -> None:
    root = ProjectRoot(str(repo), RootSource.ARGUMENT)
    setup = journals.configured(specs, root=str(repo), environ={}, cwd=str(repo))
    service.save(SaveRequest(goal="Send the invoices", next_steps=("Send the invoice to bob",)), root, setup=setup)


def test_the_readme_mcp_json_is_read_with_no_configuration_at_all(
    repo: Path, tmp_path: Path, hermetic_git: dict[str, str]
) -> None:
    journal = tmp_path / "mailer.db"
    journal_calls(str(journal), str(journal), [("send_email", {"to": "ann"}, "COMPLETED")])
    # The README's example entry, unchanged but for the path, next to the session server's own entry.
    config = {
        "mcpServers": {
            "mailer": {
                "command": "checkpoint",
                "args": ["--journal", str(journal), "--upstream-cmd", "node /opt/mailer/server.js"],
            },
            "checkpoint-session": {"command": "checkpoint", "args": ["session"]},
        }
    }
    (repo / ".mcp.json").write_text(json.dumps(config))
    _save(repo, JournalSpec(str(journal)))
    journal_calls(
        str(journal), str(journal), [("send_email", {"to": "bob"}, "COMPLETED"), ("send_email", {}, "PENDING")]
    )

    done = _brief(repo, hermetic_git, "--hook")

    assert done.returncode == 0, done.stderr
    brief = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert f"\n\n{TITLE}\n" in brief
    assert '- #2 `send_email` `{"to":"bob"}` ✓' in brief
    assert f"checkpoint journal resolve --journal {journal} 3 --completed" in brief  # its default workflow
    assert "Before the checkpoint: 1 completed, 0 failed." in brief


def test_every_checkpoint_server_in_mcp_json_counts_and_others_do_not(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    config = {
        "mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git", "--journal", "not-ours.db"]},
            "abs": {"command": "/opt/venv/bin/checkpoint", "args": ["--journal", "/srv/a.db", "--workflow-id", "wa"]},
            "module": {
                "command": "python3",
                "args": ["-m", "checkpoint_mcp", "--journal=rel/b.db", "--upstream-cmd", "x"],
            },
            "env": {
                "command": "checkpoint",
                "args": ["--journal", "${JOURNALS:-/none}/c.db", "--workflow-id", "${WF}"],
            },
            "url": {
                "command": "checkpoint",
                "args": ["--journal", "postgresql://agent:s3cret@db/j", "--upstream-cmd", "y"],
            },
            "session": {"command": "checkpoint", "args": ["session"]},
            "broken": "not an object",
        }
    }
    (root / ".mcp.json").write_text(json.dumps(config))

    setup = journals.configured((), root=str(root), environ={"JOURNALS": "/data", "WF": "w-c"}, cwd="/elsewhere")

    assert setup.warnings == ()
    assert setup.journals == (
        Journaled("/srv/a.db", "/srv/a.db", "wa"),
        Journaled(str(root / "rel/b.db"), str(root / "rel/b.db"), str(root / "rel/b.db")),
        Journaled("/data/c.db", "/data/c.db", "w-c"),
        Journaled("postgresql://agent:s3cret@db/j", "postgresql://agent@db/j", "postgresql://agent@db/j"),
    )


def test_an_explicit_journal_comes_first_then_the_environment_then_mcp_json(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"m": {"command": "checkpoint", "args": ["--journal", "m.db"]}}})
    )
    environ = {"CHECKPOINT_JOURNAL": "e.db", "CHECKPOINT_WORKFLOW_ID": "we"}

    explicit = journals.configured([JournalSpec("x.db", "wx")], root=str(tmp_path), environ=environ, cwd="/work")
    from_env = journals.configured((), root=str(tmp_path), environ=environ, cwd="/work")
    from_file = journals.configured((), root=str(tmp_path), environ={}, cwd="/work")

    assert explicit.journals == (Journaled("/work/x.db", "/work/x.db", "wx"),)
    assert from_env.journals == (Journaled("/work/e.db", "/work/e.db", "we"),)
    assert from_file.journals == (Journaled(str(tmp_path / "m.db"), str(tmp_path / "m.db"), str(tmp_path / "m.db")),)


def test_each_workflow_id_goes_with_the_journal_before_it() -> None:
    args = ["--journal", "a.db", "--journal=b.db", "--workflow-id", "wb", "--journal", "c.db", "--workflow-id=wc"]

    assert journals.pair_options(args) == [JournalSpec("a.db"), JournalSpec("b.db", "wb"), JournalSpec("c.db", "wc")]


def test_a_workflow_id_without_its_journal_is_a_usage_error(repo: Path, hermetic_git: dict[str, str]) -> None:
    done = _brief(repo, hermetic_git, "--workflow-id", "w", "--journal", "a.db")

    assert done.returncode == 2
    assert "each --workflow-id goes right after the --journal it names" in done.stderr


def test_an_mcp_json_that_is_not_json_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")

    setup = journals.configured((), root=str(tmp_path), environ={}, cwd=str(tmp_path))

    assert setup.journals == ()
    assert setup.warnings[0].startswith(f"{tmp_path / '.mcp.json'} could not be read to find the project's journals")


@pytest.mark.parametrize("kind", ["missing", "garbage", "foreign sqlite"])
def test_a_journal_that_cannot_be_read_is_a_warning_and_the_brief_is_otherwise_unchanged(
    repo: Path, tmp_path: Path, hermetic_git: dict[str, str], kind: str
) -> None:
    _save(repo)
    plain = _brief(repo, hermetic_git)
    journal = tmp_path / "j.db"
    if kind == "garbage":
        journal.write_bytes(b"this is not a database" * 100)
    elif kind == "foreign sqlite":
        import sqlite3

        with sqlite3.connect(journal) as con:
            con.execute("CREATE TABLE calls (x)")
    before = journal.read_bytes() if journal.exists() else None

    done = _brief(repo, hermetic_git, "--journal", str(journal))

    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    (warning,) = [line for line in lines if line.startswith("> ⚠")]
    assert warning.startswith(f"> ⚠ Journal {journal} could not be read, so its side effects are not shown: ")
    assert "\n".join(line for line in lines if line != warning) == plain.stdout
    assert (journal.read_bytes() if journal.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["j.db", "my-app"] if before is not None else ["my-app"])


def test_a_brief_creates_no_file_and_changes_no_byte_of_the_journal(
    repo: Path, tmp_path: Path, hermetic_git: dict[str, str]
) -> None:
    journal = tmp_path / "j.db"
    journal_calls(str(journal), str(journal), [("send_email", {"to": "ann"}, "PENDING")])
    _save(repo, JournalSpec(str(journal)))
    files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.is_file()}

    done = _brief(repo, hermetic_git, "--journal", str(journal))

    assert done.returncode == 0, done.stderr
    assert "### ⚠ In doubt" in done.stdout
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.is_file()} == files
    assert not (tmp_path / "j.db-wal").exists()
    assert not (tmp_path / "j.db-shm").exists()


def test_a_version_1_checkpoint_still_loads_and_its_journal_is_read_by_time(
    repo: Path, tmp_path: Path, hermetic_git: dict[str, str]
) -> None:
    # The original tool's file (version 1, saved 2026-10-08): it knew of no journal, so every call the journal
    # finished after its updatedAt counts as done since, and PENDING ones as in doubt.
    (repo / ".claude-checkpoint").write_bytes((FIXTURES / "spec_example.claude-checkpoint").read_bytes())
    journal = tmp_path / "j.db"
    journal_calls(
        str(journal), str(journal), [("send_email", {"to": "ann"}, "COMPLETED"), ("charge_card", {}, "PENDING")]
    )

    done = _brief(repo, hermetic_git, "--journal", str(journal), "--format", "full")

    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["checkpoint"]["version"] == 2
    (entry,) = document["journals"]
    assert entry["since"] == "time"
    assert [c["seq"] for c in entry["inDoubt"]] == [2]
    assert entry["completedSince"]["total"] == 1
    assert (repo / ".claude-checkpoint").read_bytes() == (FIXTURES / "spec_example.claude-checkpoint").read_bytes()
    assert os.path.exists(journal)


def test_a_save_with_a_journal_that_cannot_be_read_still_saves_and_says_so(repo: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    root = ProjectRoot(str(repo), RootSource.ARGUMENT)
    setup = journals.configured([JournalSpec(str(missing))], root=str(repo), environ={}, cwd=str(repo))

    outcome = service.save(SaveRequest(goal="Send the invoices"), root, setup=setup)

    assert outcome.checkpoint.journals == ()
    assert any(
        w.startswith(f"Journal {missing} could not be read, so its position was not saved") for w in outcome.warnings
    )
    assert json.loads((repo / ".claude-checkpoint").read_text())["journals"] == []
    assert not missing.exists()


def test_more_journaled_workflows_than_the_file_holds_are_cut_with_a_warning(repo: Path, tmp_path: Path) -> None:
    journal = tmp_path / "j.db"
    journal_calls(str(journal), "w0", [("send_email", {}, "COMPLETED")])
    specs = [JournalSpec(str(journal), f"w{i}") for i in range(25)]
    root = ProjectRoot(str(repo), RootSource.ARGUMENT)
    setup = journals.configured(specs, root=str(repo), environ={}, cwd=str(repo))

    outcome = service.save(SaveRequest(goal="Many agents"), root, setup=setup)

    assert len(outcome.checkpoint.journals) == 20
    assert any("first 20 of 25 journaled workflows" in w for w in outcome.warnings)
    assert len(service.load(root, setup=setup).journals) == 25


def test_the_local_scope_servers_of_claude_json_count_with_mcp_json(tmp_path: Path) -> None:
    root, home = tmp_path / "project", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    mine = {"command": "checkpoint", "args": ["--journal", "/j/mcp.db", "--workflow-id", "m"]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"m": mine}}))
    local = {"command": "checkpoint", "args": ["--journal", ".checkpoint/journal.db", "--workflow-id", "mine"]}
    elsewhere = {"command": "checkpoint", "args": ["--journal", "/j/other.db", "--workflow-id", "o"]}
    user = {"command": "checkpoint", "args": ["--journal", "/j/user.db", "--workflow-id", "u"]}
    claude_json = {
        "numStartups": 3,
        "projects": {str(root): {"mcpServers": {"mine": local}}, "/other": {"mcpServers": {"o": elsewhere}}},
        "mcpServers": {"u": user},
    }
    (home / ".claude.json").write_text(json.dumps(claude_json, indent=2))

    setup = journals.configured((), root=str(root), environ={"HOME": str(home)}, cwd="/elsewhere")

    local_journal = str(root / ".checkpoint" / "journal.db")
    assert setup.journals == (
        Journaled("/j/mcp.db", "/j/mcp.db", "m"),
        Journaled(local_journal, local_journal, "mine"),
    )
    without_home = journals.configured((), root=str(root), environ={}, cwd="/elsewhere")
    assert without_home.journals == (Journaled("/j/mcp.db", "/j/mcp.db", "m"),)
    (home / ".claude.json").write_text("{not json")
    broken = journals.configured((), root=str(root), environ={"HOME": str(home)}, cwd="/elsewhere")
    assert broken.journals == (Journaled("/j/mcp.db", "/j/mcp.db", "m"),)
    assert broken.warnings[0].startswith(f"{home / '.claude.json'} could not be read")


def test_the_checkpoint_servers_of_gemini_settings_count_with_mcp_json(tmp_path: Path) -> None:
    mine = {"command": "checkpoint", "args": ["--journal", "/j/mcp.db", "--workflow-id", "m"]}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"m": mine}}))
    wrapped = {"command": "checkpoint", "args": ["--journal", ".checkpoint/journal.db", "--workflow-id", "mail"]}
    plain = {"httpUrl": "http://127.0.0.1:9/mcp"}
    gemini = {"mcpServers": {"mail": wrapped, "plain": plain}, "hooks": {}}
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps(gemini))

    setup = journals.configured((), root=str(tmp_path), environ={}, cwd="/elsewhere")

    in_gemini = str(tmp_path / ".checkpoint" / "journal.db")
    assert setup.journals == (
        Journaled("/j/mcp.db", "/j/mcp.db", "m"),
        Journaled(in_gemini, in_gemini, "mail"),
    )


def test_the_servers_of_codex_s_project_config_toml_count_and_a_broken_one_is_a_warning(tmp_path: Path) -> None:
    codex = tmp_path / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text(
        "# Codex's project file, as `checkpoint init --client codex` leaves it\n"
        "[mcp_servers.mailbox]\n"
        'command = "/venv/bin/checkpoint"\n'
        'args = ["--journal", ".checkpoint/journal.db", "--workflow-id", "mailbox", "--policy", "p.toml",'
        ' "--upstream-cmd", "mail-server"]\n'
        "[mcp_servers.plain]\n"
        'command = "mail-server"\n'
        'args = ["--journal", "/not/ours.db"]\n'
        "[mcp_servers.checkpoint-session]\n"
        'command = "/venv/bin/checkpoint"\n'
        'args = ["session"]\n'
    )

    setup = journals.configured((), root=str(tmp_path), environ={}, cwd="/elsewhere")

    journal = str(tmp_path / ".checkpoint" / "journal.db")
    assert setup.journals == (Journaled(journal, journal, "mailbox", str(tmp_path / "p.toml")),)
    assert setup.warnings == ()
    (codex / "config.toml").write_text("[mcp_servers.mailbox\n")
    broken = journals.configured((), root=str(tmp_path), environ={}, cwd="/elsewhere")
    assert broken.journals == ()
    assert broken.warnings[0].startswith(f"{codex / 'config.toml'} could not be read to find the project's journals")
