"""The documentation says what the code does: error codes, flags, commands with help, the two set-up commands."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from checkpoint_mcp.cli import main
from checkpoint_mcp.refusals import ERROR_CODES

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def error_table() -> str:
    lines = ["| Code | Old code | Name | When |", "|---|---|---|---|"]
    lines += [
        f"| {code} | {'—' if row.was is None else row.was} | {row.name} | {row.when} |"
        for code, row in ERROR_CODES.items()
    ]
    return "\n".join(lines)


def test_the_readme_error_table_is_the_code_table_of_refusals_py() -> None:
    block = README.split("<!-- error-codes:start -->")[1].split("<!-- error-codes:end -->")[0].strip()
    assert block == error_table()


def test_the_changelog_maps_every_moved_code_as_refusals_py_does() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    block = changelog.split("<!-- moved-codes:start -->")[1].split("<!-- moved-codes:end -->")[0]
    rows = [line.strip() for line in block.strip().splitlines()][2:]
    assert rows == [f"| {row.was} | {code} | {row.name} |" for code, row in ERROR_CODES.items() if row.was is not None]
    assert len(rows) == 10


def test_every_proxy_flag_is_in_the_readme_flags_table() -> None:
    for param in main.params:
        for opt in param.opts:
            if opt.startswith("--") and opt not in ("--help", "--checkpoint-version"):
                assert f"`{opt}`" in README, f"{opt} is missing from the README"


def _commands(group: click.Group, prefix: str = "checkpoint") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = [(prefix, group)]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix} {name}")
        else:
            found.append((f"{prefix} {name}", command))
    return found


def test_every_command_and_option_has_help_text() -> None:
    for name, command in _commands(main):
        assert command.help, f"`{name}` has no help text"
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.help, f"`{name} {param.opts[0]}` has no help text"


def test_the_readme_opens_with_exactly_the_two_set_up_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["./scripts/demo", "./scripts/test"]
    for script in commands:
        path = ROOT / script
        assert path.is_file(), f"{script} must exist"
        assert os.access(path, os.X_OK), f"{script} must be executable"


def test_ci_runs_the_readme_test_command() -> None:
    assert "./scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_every_serve_flag_is_in_the_readme() -> None:
    gateway = README.split("<!-- gateway:start -->")[1].split("<!-- gateway:end -->")[0]
    for param in main.commands["serve"].params:
        for opt in param.opts:
            if opt.startswith("--") and opt != "--help":
                assert f"`{opt}`" in gateway, f"serve {opt} is missing from the README's gateway section"
