"""Plain helpers the session tests share (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types

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
