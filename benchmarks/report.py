"""The report: machine facts, the command line, and a markdown section of ``docs/benchmarks.md`` per benchmark.

Each benchmark owns the text between ``<!-- bench:NAME:start -->`` and ``<!-- bench:NAME:end -->``; a run
replaces only its own section, so the document collects the latest run of every benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from contenders import ROOT

DOC = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Target:
    """One target of issue 6 next to its measured value."""

    text: str
    measured: str
    met: bool

    def row(self) -> str:
        """A markdown table row."""
        verdict = "**met**" if self.met else "**not met**"
        return f"| {self.text} | {self.measured} | {verdict} |"


def targets_table(targets: Sequence[Target], issue: int = 6) -> str:
    """The targets as a markdown table."""
    rows = [f"| Target (issue {issue}) | Measured | Verdict |", "|---|---|---|"]
    rows += [target.row() for target in targets]
    return "\n".join(rows)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; columns after the first are right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or the platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for row in info:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def filesystem_of(path: Path) -> str:
    """The file system type and device holding ``path`` (from /proc/mounts), e.g. ``ext4 on /dev/vda``."""
    best = ("", "unknown", "?")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for row in mounts:
                device, point, kind = row.split()[:3]
                if str(path).startswith(point) and len(point) > len(best[0]):
                    best = (point, kind, device)
    except OSError:
        pass
    return f"{best[1]} on {best[2]}"


def machine(temp_dir: Path) -> str:
    """One line describing where the numbers come from."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}; {os.cpu_count()} cores ({cpu_model()}); Linux {platform.release()}; "
        f"Python {platform.python_version()}; temp dir {temp_dir} ({filesystem_of(temp_dir)}); "
        f"load average before the run {os.getloadavg()[0]:.2f}"
    )


def command_line(script: str, argv: Sequence[str]) -> str:
    """The command that reproduces this run."""
    return shlex.join([".venv/bin/python", f"benchmarks/{script}.py", *argv])


def section(title: str, command: str, where: str, body: str, quick: bool) -> str:
    """The markdown of one benchmark's section."""
    note = "\n\n> **Quick smoke run** (tiny counts): not a measurement.\n" if quick else ""
    return f"## {title}\n{note}\nCommand: `{command}`\n\nRun: {where}\n\n{body.strip()}\n"


def write_section(doc: Path, name: str, markdown: str) -> None:
    """Replace (or append) the section ``name`` of ``doc``."""
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    block = f"{start}\n{markdown.strip()}\n{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{block}{tail}"
    else:
        text = f"{text.rstrip()}\n\n{block}\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")


def common_arguments(parser: argparse.ArgumentParser) -> None:
    """Options every benchmark script takes."""
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke run, not a measurement")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"markdown file to update (default: {DOC.relative_to(ROOT)}; a --quick run writes none unless given)",
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--tmp", type=Path, default=None, help="directory for journals and scratch files")


def output_path(args: argparse.Namespace) -> Path | None:
    """Where the section goes: ``--output``, else the doc (except for quick runs), unless ``--no-write``."""
    if args.no_write:
        return None
    if args.output is not None:
        return Path(args.output)
    return None if args.quick else DOC


@contextlib.contextmanager
def scratch_dir(args: argparse.Namespace, name: str) -> Iterator[Path]:
    """A fresh temporary directory (inside ``--tmp`` if given) for journals and the commit floor, removed after."""
    parent = str(args.tmp) if args.tmp is not None else None
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-", dir=parent) as tmp:
        yield Path(tmp)


def publish(
    args: argparse.Namespace,
    name: str,
    *,
    title: str,
    argv: Sequence[str],
    where: str,
    body: str,
    script: str | None = None,
) -> None:
    """Print the section, and write it into the doc if asked; ``script`` names the script when it is not ``name``."""
    markdown = section(title, command_line(script or name, argv), where, body, args.quick)
    print(markdown)
    doc = output_path(args)
    if doc is not None:
        write_section(doc, name, markdown)
        print(f"(written to {doc})", file=sys.stderr)
