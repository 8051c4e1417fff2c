"""`checkpoint brief`'s fast path (no click) prints, fails and exits exactly as the click command does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_mcp.session import brief_cli, root, service, store
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource

from .helpers import write

# `checkpoint` as installed (the console script: fast path first), and the click command alone, under the same name.
SCRIPT = Path(sys.executable).parent / "checkpoint"
FAST = [str(SCRIPT), "brief"]
CLICK = [sys.executable, "-c", "import sys; from checkpoint_mcp.cli import main; sys.argv[0] = 'checkpoint'; main()"]
CLICK += ["brief"]
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the checkpoint console script is not installed here")


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60, check=False
    )
    return done.returncode, done.stdout, done.stderr


def test_the_names_it_writes_out_are_the_session_codes_own() -> None:
    assert brief_cli._ROOT_VARIABLES == (root.CHECKPOINT_ENV, root.CLAUDE_ENV)
    assert brief_cli._CHECKPOINT_FILES == (store.CHECKPOINT_NAME, store.BACKUP_NAME)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], (None, "brief", False)),
        (["--hook"], (None, "brief", True)),
        (["--format", "full"], (None, "full", False)),
        (["--format=full", "--hook"], (None, "full", True)),
        (["--hook", "--project-root", "/"], ("/", "brief", True)),
        (["--project-root=/no/such/dir"], ("/no/such/dir", "brief", False)),
    ],
)
def test_the_plain_forms_are_parsed_here(argv: list[str], expected: tuple[str | None, str, bool]) -> None:
    options = brief_cli.parse(argv, {})

    assert options is not None
    assert (options.project_root, options.output, options.hook) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--hook", "--hook"],
        ["--hook=yes"],
        ["--format"],
        ["--format", "BRIEF"],
        ["--format", "json"],
        ["--project-root"],
        ["--project-root="],
        ["--project-root", "--hook"],
        ["--project-root", "/etc/hostname"],
        ["--project"],
        ["extra"],
        ["--", "--hook"],
    ],
)
def test_anything_else_goes_to_click(argv: list[str]) -> None:
    assert brief_cli.parse(argv, {}) is None


def test_shell_completion_goes_to_click() -> None:
    assert brief_cli.parse([], {"_CHECKPOINT_COMPLETE": "bash_complete"}) is None


def test_a_relative_project_root_is_resolved_as_click_resolves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)

    options = brief_cli.parse(["--project-root", "link"], {})

    assert options is not None
    assert options.project_root == str((tmp_path / "real").resolve())


@needs_script
@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--hook"],
        ["--format", "full"],
        ["--format=full", "--hook"],
        ["--project-root", "PROJECT"],
        ["--project-root=PROJECT", "--hook"],
        ["--project-root", "MISSING"],
        ["--project-root", "relative-dir"],
        ["--format", "BRIEF"],
        ["--help"],
    ],
)
def test_the_fast_path_and_the_click_command_print_and_exit_alike(repo: Path, tmp_path: Path, argv: list[str]) -> None:
    service.save(SaveRequest(goal="Same either way"), ProjectRoot(str(repo), RootSource.ARGUMENT))
    write(repo, "late.txt", "after the save\n")
    (repo / "relative-dir").mkdir()
    replaced = [a.replace("PROJECT", str(repo)).replace("MISSING", str(tmp_path / "missing")) for a in argv]

    fast, click = _run(FAST + replaced, repo), _run(CLICK + replaced, repo)

    assert fast == click


@needs_script
@pytest.mark.parametrize("setup", ["nothing", "corrupt", "outside"])
def test_the_edge_cases_print_and_exit_alike(tmp_path: Path, repo: Path, setup: str) -> None:
    where = repo
    if setup == "corrupt":
        (repo / ".claude-checkpoint").write_text("not json")
    elif setup == "outside":
        where = tmp_path / "plain-folder"
        where.mkdir()
        service.save(SaveRequest(goal="No git here"), ProjectRoot(str(where), RootSource.ARGUMENT))

    for env in ({}, {"CLAUDE_PROJECT_DIR": str(where)}):
        assert _run(FAST, where, env) == _run(CLICK, where, env), env


@needs_script
def test_a_closed_pipe_ends_both_with_status_one_and_no_traceback(repo: Path) -> None:
    service.save(SaveRequest(goal="Nobody reads this"), ProjectRoot(str(repo), RootSource.ARGUMENT))
    results = []
    for argv in (FAST, CLICK):
        read_end, write_end = os.pipe()
        os.close(read_end)
        with subprocess.Popen(argv, cwd=repo, stdout=write_end, stderr=subprocess.PIPE, text=True) as process:
            os.close(write_end)
            _, err = process.communicate(timeout=60)
        results.append((process.returncode, err))

    assert results[0] == results[1]
    assert results[0][0] == 1


def test_the_fast_path_imports_neither_click_nor_the_sdk(repo: Path) -> None:
    service.save(SaveRequest(goal="Fast start"), ProjectRoot(str(repo), RootSource.ARGUMENT))
    imported = {}
    for argv in (["--hook"], ["--help"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "checkpoint_mcp", "brief", *argv],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0
        imported[argv[0]] = {
            line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
        }

    assert "checkpoint_mcp.session.service" in imported["--hook"]
    assert not {m for m in imported["--hook"] if m.split(".")[0] in {"click", "logging", "subprocess", "mcp"}}
    assert "click" in imported["--help"]
