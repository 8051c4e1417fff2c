"""Save and load timings of the session server's service on big git repositories.

Builds repositories of 10,000 and 100,000 committed files with 200 of them modified (in a temporary folder,
or under --workdir to keep them), then times `service.save` and `service.load` in-process, which is what each
tool call runs after the MCP layer. Prints a markdown table.

    .venv/bin/python benchmarks/session_save_load.py [--sizes 10000 100000] [--rounds 5] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from checkpoint_mcp.session import service
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource

DIRTY = 200
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def build(root: Path, files: int) -> None:
    """A repository of ``files`` small committed files in nested folders, ``DIRTY`` of them then modified."""
    if (root / ".git").exists():
        return
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=GIT_ENV)
    for i in range(files):
        folder = root / f"pkg{i // 1000:03}" / f"mod{(i // 100) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:06}.py").write_text(f"value = {i}\n" * 20)
    (root / ".gitignore").write_text(".claude-checkpoint*\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "files"], cwd=root, check=True, env=GIT_ENV)
    for i in range(0, files, files // DIRTY):
        path = root / f"pkg{i // 1000:03}" / f"mod{(i // 100) % 10}" / f"f{i:06}.py"
        path.write_text(path.read_text() + "# modified\n")


def measure(root: Path, rounds: int) -> tuple[float, float, int]:
    """Median save and load seconds over ``rounds``, and how many files the checkpoint lists."""
    project = ProjectRoot(str(root), RootSource.ARGUMENT)
    service.load(project)  # warm the filesystem cache, as a session that has been running would have it
    saves, loads = [], []
    listed = 0
    for _ in range(rounds):
        started = time.perf_counter()
        outcome = service.save(SaveRequest(goal="benchmark", mode="merge"), project)
        saves.append(time.perf_counter() - started)
        started = time.perf_counter()
        service.load(project)
        loads.append(time.perf_counter() - started)
        listed = len(outcome.checkpoint.modified_files)
    return statistics.median(saves), statistics.median(loads), listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        print(f"| files | modified | save (median of {args.rounds}) | load (median of {args.rounds}) | listed |")
        print("|---:|---:|---:|---:|---:|")
        for size in args.sizes:
            root = workdir / f"repo-{size}"
            build(root, size)
            save, load, listed = measure(root, args.rounds)
            print(f"| {size:,} | {DIRTY} | {save * 1000:.0f} ms | {load * 1000:.0f} ms | {listed} |")


if __name__ == "__main__":
    main()
