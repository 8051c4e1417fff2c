"""A shell server `checkpoint init` does not know (``servers/shell_server.py``: ``execute_command(command)``, no
hints, no profile), after a plain `init` (issue 43): guessed from its name and argument to run shell commands, and
the summary says so. A command sent again from a new session is refused once and runs when the agent sends it
again (``confirm``); a webhook POST sent again is refused outright, and stays refused; within one session every
repeat runs. Both sides counted: a file the commands append to, and a loopback sink.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from checkpoint_mcp.refusals import REPEAT_REFUSED

from .agent_sessions import Project, Session, Tally, plain_init, session
from .webhook_sink import Sink

SHELL_SERVER = Path(__file__).resolve().parents[1] / "servers" / "shell_server.py"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    work = tmp_path / "work"
    work.mkdir()
    entry = {"command": sys.executable, "args": [str(SHELL_SERVER)], "env": {"SHELL_DIR": str(work)}}
    return plain_init(tmp_path / "project", {"shell": entry}), work


def runs(work: Path) -> int:
    path = work / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.timeout(180)
def test_an_unknown_shell_tool_asks_to_confirm_a_repeat_from_a_new_session_and_refuses_a_repeated_post(
    project: tuple[Project, Path], sink: Sink
) -> None:
    initialized, work = project
    assert "review the guesses: shell's tools execute_command (command) were taken as running shell commands" in (
        initialized.summary
    )
    tally = Tally()
    build = "echo run >> runs.txt"
    hook = f"curl -s -X POST {sink.url}/deploy"

    async def run(agent: Session, command: str, what: str) -> None:
        outcome = tally.meant(what, await agent.call("shell", "execute_command", {"command": command}))
        assert not outcome.is_error, outcome

    async def scenario() -> None:
        async with session(initialized) as first:
            await run(first, build, "a local command")
            await run(first, build, "the same local command within the session")
            await run(first, hook, "the webhook")
        async with session(initialized) as second:
            asked = await second.call("shell", "execute_command", {"command": build})
            assert asked.code == REPEAT_REFUSED, asked
            assert "send this call again within 10m: it will then run" in asked.text, asked.text
            await run(second, build, "the local command, confirmed")
            for _ in range(2):
                caught = await second.call("shell", "execute_command", {"command": hook})
                assert caught.code == REPEAT_REFUSED, caught

    anyio.run(scenario)
    tally.effects("the local command", runs(work), 3)
    tally.effects("the webhook", sink.counted["POST /deploy"], 1)
    tally.assert_clean()
