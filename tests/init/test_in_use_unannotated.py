"""A server whose tools carry no annotations at all (``servers/unannotated_server.py``), after a plain `checkpoint
init`: the tools whose names say they read (``get_status``, ``list_items``, ``search_docs``) read afresh every
time, in one session and the next; the one that does not (``create_ticket``) is protected: the same ticket from a
new session is refused, while the agent's deliberate second ticket within its own session is opened.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from checkpoint_mcp.refusals import REPEAT_REFUSED

from .agent_sessions import Project, Session, Tally, plain_init, session
from support import journal_calls

DESK_SERVER = Path(__file__).resolve().parents[1] / "servers" / "unannotated_server.py"
TICKET = {"title": "Login page returns 500"}


@pytest.fixture
def desk(tmp_path: Path) -> tuple[Project, Path]:
    folder = tmp_path / "desk"
    (folder / "docs").mkdir(parents=True)
    entry = {"command": sys.executable, "args": [str(DESK_SERVER)], "env": {"DESK_DIR": str(folder)}}
    return plain_init(tmp_path / "project", {"desk": entry}), folder


def tickets(folder: Path) -> list[str]:
    path = folder / "tickets.jsonl"
    return [json.loads(line)["title"] for line in path.read_text().splitlines()] if path.exists() else []


def test_init_takes_the_read_names_as_reads_and_says_they_are_guesses(desk: tuple[Project, Path]) -> None:
    project, _ = desk
    [row] = [line for line in project.summary.splitlines() if line.startswith("  desk ")]
    assert row.split()[1:7] == ["4", "0", "3", "0", "1", "hints,"], "3 guessed reads, create_ticket protected"
    assert "review the guesses: desk's tools get_status, list_items, search_docs have no hints" in project.summary
    assert "review first: desk's tools create_ticket have no hints" in project.summary
    text = project.policy("desk")
    assert "[tools.get_status]\njournal = false\n" in text
    assert '[tools.create_ticket]\nrepeat = "refuse"\nwindow = "24h"\nwithin_session = "run"\n' in text


async def read_all(agent: Session, tally: Tally, when: str) -> dict[str, str]:
    reads = {
        "get_status": await agent.call("desk", "get_status", {}),
        "list_items": await agent.call("desk", "list_items", {}),
        "search_docs": await agent.call("desk", "search_docs", {"query": "invoice"}),
    }
    return {tool: tally.meant(f"{tool} ({when})", outcome).text for tool, outcome in reads.items()}


@pytest.mark.timeout(120)
def test_reads_guessed_from_their_names_read_afresh_in_one_session_and_the_next(desk: tuple[Project, Path]) -> None:
    project, folder = desk
    tally = Tally()

    def change_the_world(status: str, item: str, doc: str) -> None:
        (folder / "status.txt").write_text(status)
        with (folder / "items.txt").open("a") as items:
            items.write(item + "\n")
        (folder / "docs" / doc).write_text("the invoice for March")

    async def scenario() -> None:
        async with session(project) as first:
            change_the_world("green", "apples", "a.md")
            assert await read_all(first, tally, "first read") == {
                "get_status": "status: green; 0 ticket(s)",
                "list_items": "items: apples",
                "search_docs": "found: a.md",
            }
            change_the_world("red", "pears", "b.md")
            assert await read_all(first, tally, "the same reads again") == {
                "get_status": "status: red; 0 ticket(s)",
                "list_items": "items: apples, pears",
                "search_docs": "found: a.md, b.md",
            }
        async with session(project) as second:
            change_the_world("amber", "plums", "c.md")
            assert await read_all(second, tally, "in a new session") == {
                "get_status": "status: amber; 0 ticket(s)",
                "list_items": "items: apples, pears, plums",
                "search_docs": "found: a.md, b.md, c.md",
            }

    anyio.run(scenario)
    tally.assert_clean()
    assert journal_calls(project.journal, "desk") == [], "reads are not journaled"


@pytest.mark.timeout(120)
def test_the_same_ticket_from_a_new_session_is_refused(desk: tuple[Project, Path]) -> None:
    project, folder = desk
    tally = Tally()

    async def scenario() -> None:
        async with session(project) as first:
            opened = tally.meant("create_ticket", await first.call("desk", "create_ticket", TICKET))
            assert opened.text == "ticket #1 opened: Login page returns 500"
        async with session(project) as second:
            again = await second.call("desk", "create_ticket", TICKET)
            assert again.code == REPEAT_REFUSED, again
            status = tally.meant("get_status", await second.call("desk", "get_status", {}))
            assert status.text == "status: unknown; 1 ticket(s)"

    anyio.run(scenario)
    tally.effects("the ticket", len(tickets(folder)), 1)
    tally.assert_clean()


@pytest.mark.timeout(120)
def test_a_second_ticket_the_agent_opens_on_purpose_within_its_session_is_opened(desk: tuple[Project, Path]) -> None:
    project, folder = desk
    tally = Tally()

    async def scenario() -> None:
        async with session(project) as agent:
            tally.meant("create_ticket", await agent.call("desk", "create_ticket", TICKET))
            # It saw the first answer and opens the same ticket again, deliberately (a second occurrence).
            tally.meant("create_ticket again, in the same session", await agent.call("desk", "create_ticket", TICKET))
        async with session(project) as later:  # a later session repeating it is the resumed agent redoing it
            again = await later.call("desk", "create_ticket", TICKET)
            assert again.code == REPEAT_REFUSED, again

    anyio.run(scenario)
    tally.effects("the ticket", len(tickets(folder)), 2)
    tally.assert_clean()
