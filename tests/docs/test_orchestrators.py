"""The examples of docs/orchestrators.md run as written and do what the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp.refusals import DIVERGENCE

PAGE = Path(__file__).parents[2] / "docs" / "orchestrators.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def run_example(tmp_path: Path, code: str) -> tuple[str, list[str]]:
    (tmp_path / "example.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEMO_")}
    for name in ("outbox.txt", "ledger.txt"):
        (tmp_path / name).touch()
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    side_effects = (tmp_path / "outbox.txt").read_text().splitlines() + (
        tmp_path / "ledger.txt"
    ).read_text().splitlines()
    return done.stdout, side_effects


def test_the_page_has_three_examples() -> None:
    assert len(EXAMPLES) == 3


def test_the_key_example_runs_the_call_once_and_replays_it(tmp_path: Path) -> None:
    out, effects = run_example(tmp_path, EXAMPLES[0])
    assert out.splitlines() == [
        "seq 1, replayed=False: sent 'Order 1042 has shipped' to ann@example.com",
        "seq 1, replayed=True: sent 'Order 1042 has shipped' to ann@example.com",
    ]
    assert effects == ["to=ann@example.com subject='Order 1042 has shipped'"]


def test_the_sequence_example_replays_then_refuses_a_divergent_step(tmp_path: Path) -> None:
    out, effects = run_example(tmp_path, EXAMPLES[1])
    lines = out.splitlines()
    assert lines[:4] == [
        "step 1: charged ann 42.00 EUR (replayed=False)",
        "step 2: sent 'Receipt' to ann@example.com (replayed=False)",
        "step 1: charged ann 42.00 EUR (replayed=True)",
        "step 2: sent 'Receipt' to ann@example.com (replayed=True)",
    ]
    assert lines[4].startswith(f"step 1 refused ({DIVERGENCE}): divergence")
    assert lines[5] == "step 2: sent 'Receipt' to ann@example.com (replayed=True)"
    assert sorted(effects) == ["customer=ann cents=4200", "to=ann@example.com subject='Receipt'"]


@pytest.mark.parametrize("example", [2])
def test_the_replay_from_start_example_sends_each_mail_once(tmp_path: Path, example: int) -> None:
    out, effects = run_example(tmp_path, EXAMPLES[example])
    assert [line.strip() for line in out.splitlines()] == [
        "sent 'News' to ann@example.com",
        "sent 'News' to bob@example.com",
        "sent 'News' to ann@example.com (replayed)",
        "sent 'News' to bob@example.com (replayed)",
        "sent 'News' to cy@example.com",
    ]
    assert len(effects) == 3


FRAMEWORKS = {
    "MCP Python SDK": "yes",
    "OpenAI Agents SDK": "yes",
    "Pydantic AI": "yes",
    "FastMCP": "yes",
    "langchain-mcp-adapters": "no",
    "llama-index-tools-mcp": "no",
}


def framework_rows() -> dict[str, list[str]]:
    """The rows of the table under "## Agent frameworks": first cell -> every cell."""
    section = PAGE.read_text(encoding="utf-8").split("## Agent frameworks", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    assert [cell.strip() for cell in header] == ["Framework", "Transport", "`_meta` passes", "What protects its calls"]
    return {row[0]: [cell.strip() for cell in row] for row in body}


def test_the_framework_table_names_each_framework_with_its_transport_meta_and_protection() -> None:
    rows = framework_rows()
    for framework, passes_meta in FRAMEWORKS.items():
        [row] = [cells for name, cells in rows.items() if framework in name]
        assert len(row) == 4, row
        assert all(row), row
        assert row[2].startswith(passes_meta), row


def test_the_page_no_longer_says_the_openai_agents_sdk_drops_meta() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert not re.search(r"OpenAI Agents SDK[^.|]*drops? `_meta`", text)
    assert "drops `_meta` on the way to the server (the OpenAI Agents SDK" not in text
