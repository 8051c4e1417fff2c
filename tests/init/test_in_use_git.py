"""mcp-server-git (PyPI, pinned), after a plain `checkpoint init`, on a real repository: what an agent does with git
repeats calls all the time, and every one of those repeats runs. The repository is the truth: HEAD is on the branch
checked out last, two "wip" commits are two commits, and a new session can check out a branch an earlier one did.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .agent_sessions import Project, Session, Tally, plain_init, session
from realservers import BY_PROFILE, git


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    entry = BY_PROFILE["git"].entry(tmp_path)
    return plain_init(tmp_path / "project", {"git": entry}), tmp_path / "repo"


def head(repository: Path) -> str:
    return git(repository, "rev-parse", "--abbrev-ref", "HEAD").strip()


def commits(repository: Path, branch: str) -> int:
    return int(git(repository, "rev-list", "--count", branch))


def test_init_uses_the_reviewed_profile_of_mcp_server_git(project: tuple[Project, Path]) -> None:
    initialized, _ = project
    [row] = [line for line in initialized.summary.splitlines() if line.startswith("  git ")]
    assert row.split()[1:6] == ["12", "7", "0", "5", "0"]
    assert row.endswith("profile mcp-server-git 2026.10.19")


@pytest.mark.timeout(120)
def test_checkouts_and_commits_repeated_in_one_session_and_the_next_all_run(project: tuple[Project, Path]) -> None:
    initialized, repository = project
    tally = Tally()
    repo = str(repository)

    async def call(agent: Session, tool: str, **arguments: object) -> str:
        return tally.meant(tool, await agent.call("git", tool, {"repo_path": repo, **arguments})).text

    async def scenario() -> None:
        async with session(initialized) as first:
            await call(first, "git_create_branch", branch_name="feature")
            await call(first, "git_checkout", branch_name="main")
            await call(first, "git_checkout", branch_name="feature")
            await call(first, "git_checkout", branch_name="main")  # the same call as two steps ago
            assert head(repository) == "main"
            for content in ("one\n", "two\n"):  # the same add and the same commit, with new changes between
                (repository / "notes.txt").write_text(content)
                await call(first, "git_add", files=["notes.txt"])
                await call(first, "git_commit", message="wip")
        async with session(initialized) as second:  # a new session goes back to a branch the last one checked out
            await call(second, "git_checkout", branch_name="feature")
            assert head(repository) == "feature"

    anyio.run(scenario)
    tally.effects("the wip commits on main", commits(repository, "main") - 1, 2)
    assert git(repository, "log", "--format=%s", "-3", "main").split() == ["wip", "wip", "first"]
    tally.assert_clean()
