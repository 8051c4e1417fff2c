"""@modelcontextprotocol/server-filesystem (npm, pinned), after a plain `checkpoint init`: an agent writes, moves a
file back and forth, edits it, and reads it, in one session and the next; every repeat runs. The folder is the
truth.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .agent_sessions import Project, Session, Tally, plain_init, session
from realservers import BY_PROFILE


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    entry = BY_PROFILE["filesystem"].entry(tmp_path)
    return plain_init(tmp_path / "project", {"files": entry}), tmp_path / "files"


@pytest.mark.timeout(120)
def test_writes_moves_and_reads_repeated_in_one_session_and_the_next_all_run(project: tuple[Project, Path]) -> None:
    initialized, folder = project
    assert "profile @modelcontextprotocol/server-filesystem 2026.8.31" in initialized.summary
    tally = Tally()
    a, b = str(folder / "a.txt"), str(folder / "b.txt")

    async def call(agent: Session, tool: str, **arguments: object) -> str:
        return tally.meant(tool, await agent.call("files", tool, arguments)).text

    async def move(agent: Session, source: str, destination: str) -> None:
        await call(agent, "move_file", source=source, destination=destination)
        assert Path(destination).exists()
        assert not Path(source).exists()

    async def scenario() -> None:
        async with session(initialized) as first:
            await call(first, "write_file", path=a, content="draft\n")
            await move(first, a, b)
            await move(first, b, a)
            await move(first, a, b)  # the same call as two steps ago
            assert await call(first, "read_text_file", path=b) == "draft\n"
            await call(first, "write_file", path=a, content="draft\n")
            await call(first, "edit_file", path=a, edits=[{"oldText": "draft", "newText": "final"}])
            await call(first, "write_file", path=a, content="draft\n")  # the same call as two steps ago
            assert await call(first, "read_text_file", path=a) == "draft\n"
        async with session(initialized) as second:  # a new session moves it back as the last one did
            await call(second, "edit_file", path=a, edits=[{"oldText": "draft", "newText": "final"}])
            assert await call(second, "read_text_file", path=a) == "final\n"
            (folder / "a.txt").unlink()
            await move(second, b, a)

    anyio.run(scenario)
    tally.assert_clean()
    assert sorted(path.name for path in folder.iterdir()) == ["a.txt"]
