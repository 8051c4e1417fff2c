"""@modelcontextprotocol/server-memory (npm, pinned), after a plain `checkpoint init`: an agent creates an entity,
deletes it, creates it again, and it is back, in one session and the next. The memory file is the truth.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from .agent_sessions import Project, Tally, plain_init, session
from realservers import BY_PROFILE

ALICE = {"entities": [{"name": "Alice", "entityType": "person", "observations": ["prefers tea"]}]}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    entry = BY_PROFILE["memory"].entry(tmp_path)
    return plain_init(tmp_path / "project", {"memory": entry}), tmp_path / "memory.jsonl"


def entities(memory: Path) -> list[str]:
    lines = memory.read_text().splitlines() if memory.exists() else []
    return [record["name"] for record in map(json.loads, lines) if record.get("type") == "entity"]


@pytest.mark.timeout(120)
def test_an_entity_created_deleted_and_created_again_is_back_in_one_session_and_the_next(
    project: tuple[Project, Path],
) -> None:
    initialized, memory = project
    assert "profile @modelcontextprotocol/server-memory 2026.8.31" in initialized.summary
    tally = Tally()

    async def scenario() -> None:
        for when in ("first session", "a later session"):
            async with session(initialized) as agent:
                tally.meant(f"create_entities ({when})", await agent.call("memory", "create_entities", ALICE))
                assert entities(memory) == ["Alice"]
                delete = {"entityNames": ["Alice"]}
                tally.meant(f"delete_entities ({when})", await agent.call("memory", "delete_entities", delete))
                assert entities(memory) == []
                again = await agent.call("memory", "create_entities", ALICE)  # the same call as two steps ago
                tally.meant(f"create_entities again ({when})", again)
                graph = tally.meant("read_graph", await agent.call("memory", "read_graph", {}))
                assert '"Alice"' in graph.text, graph
                tally.effects(f"Alice in the memory ({when})", entities(memory).count("Alice"), 1)

    anyio.run(scenario)
    tally.assert_clean()
