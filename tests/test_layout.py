"""The house shows its design: the rooms of src/ keep their arrows (import-linter's contracts in pyproject.toml),
a module past 600 lines is one the house has looked at and says why, and every room says what it is for.

The contracts are checked against the real tree, and against copies of it with one wrong arrow added, so that a
broken rule is known to fail the build rather than assumed to."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "checkpoint_mcp"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=source_root,
        timeout=60,
        check=False,
    )


def test_the_real_tree_keeps_every_contract() -> None:
    result = _lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "wrong_import", "contract"),
    [
        (
            "intercept/decision/repeat.py",
            "import checkpoint_mcp.upstream.http.remote",
            "the interceptor imports no pump",
        ),
        ("intercept/decision/repeat.py", "import checkpoint_mcp.proxy.relay", "the interceptor imports no pump"),
        ("upstream/stdio/child.py", "import checkpoint_mcp.journal.base", "a transport journals nothing"),
        ("gateway/channel.py", "import checkpoint_mcp.proxy.relay", "the two pumps share only"),
        ("proxy/relay.py", "import checkpoint_mcp.gateway.streams", "the two pumps share only"),
        ("journal/base.py", "import checkpoint_mcp.session.model", "the journal imports nothing above it"),
        ("ui/views.py", "import checkpoint_mcp.intercept.decision", "only read the journal"),
        ("init/wrap.py", "import checkpoint_mcp.proxy.relay", "checkpoint init edits client files only"),
        ("upstream/http/sse.py", "import checkpoint_mcp.upstream.http.http_sse", "no import circle anywhere"),
        ("platforms/locks.py", "import checkpoint_mcp.journal.base", "the platform seams import no room"),
        (
            "config.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import checkpoint_mcp.intercept.policy",
            "the plain settings import no room",
        ),
        (
            "config.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import checkpoint_mcp.intercept.policy",
            "a transport journals nothing",
        ),
    ],
)
def test_a_wrong_arrow_breaks_its_contract(tmp_path: Path, module: str, wrong_import: str, contract: str) -> None:
    copy = tmp_path / "checkpoint_mcp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{wrong_import}  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(contract in line for line in broken), result.stdout


LONG_MODULES: dict[str, str] = {
    # A module is as long as its one concern needs (STYLE.md, habit 8); past 600 lines it is named here with the
    # reason it stays whole, so that a module growing past the line is a decision someone wrote down, not drift.
    "intercept/interceptor.py": "the router of one proxy's lines, both ways: what waits for which commit, and the "
    "lines it sends on its own (probes, elicitations), share one table of what is in flight; its decision is "
    "decision/",
    "journal/sql.py": "every statement the journal runs, in the SQL both databases accept: the unit of work and the "
    "store that writes its batches",
    "journal/postgres.py": "what PostgreSQL alone does: its connection and its recovery, advisory locks, replicas' "
    "sequences, pipelined commits",
    "refusals.py": "the wire contract: every code, its table, and each refusal's message, read side by side",
    "journal/base.py": "the journal's vocabulary and the one store interface every database implements, read side by "
    "side (issue 42 added shared ownership, replicas of a stdio proxy and session starts per client to it; issue 45 "
    "left each operation declared here once, written once by the SQL journal or its part)",
    "journal/sqlite.py": "what SQLite alone does: its connection, transactions and migrations, and the file locks of "
    "ownership (exclusive or shared) and of a replica's presence, whose liveness only the kernel knows",
}


def test_a_module_past_600_lines_is_named_with_its_reason() -> None:
    long = {
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if len(path.read_text().splitlines()) > 600
    }
    assert long <= set(LONG_MODULES), (
        f"past 600 lines, not named in LONG_MODULES with a reason: {long - set(LONG_MODULES)}"
    )
    stale = set(LONG_MODULES) - long
    assert not stale, f"named in LONG_MODULES but no longer past 600 lines: {stale}"


def test_every_room_says_what_it_is_for_and_what_it_may_import() -> None:
    rooms = ["intercept", "upstream", "proxy", "gateway"]
    for room in rooms:
        docstring = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text()))
        assert docstring, room
        assert "May import" in docstring or "may import" in docstring, room
    for package in PACKAGE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(package.read_text())), package
