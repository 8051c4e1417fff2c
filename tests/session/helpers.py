"""Plain helpers the session tests share (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types

from checkpoint_mcp.journal.conditions import NewCall

FIXTURES = Path(__file__).parent / "fixtures"


def write(root: Path, relative: str, content: str) -> Path:
    """Create or overwrite a file under root, creating its folders."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result's single text block."""
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def journal_calls(location: str, workflow: str, calls: list[tuple[str, dict[str, object], str]]) -> None:
    """Write calls into a real journal as a proxy would (PENDING first, then its outcome unless it stays PENDING).

    Each call is (tool, arguments, final state: COMPLETED, FAILED or PENDING); sequences follow the journal's last.
    """
    import json

    from checkpoint_mcp.journal import open_journal
    from checkpoint_mcp.journal.records import CallState

    journal = open_journal(location)
    try:
        lineage = journal.lineage(workflow)
        ownership = journal.acquire(lineage.root)
        seq = journal.max_seq(lineage)
        unit = journal.unit()
        for tool, arguments, state in calls:
            seq += 1
            unit.reserve(lineage.head, seq, NewCall(tool, json.dumps(arguments, separators=(",", ":")), f"{seq:064x}"))
            if state != "PENDING":
                unit.finish(lineage.head, seq, CallState(state), '{"content":[]}')
            if seq % 500 == 0:
                unit.commit()
        unit.commit()
        ownership.release()
    finally:
        journal.close()
