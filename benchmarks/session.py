"""Session: ``checkpoint brief`` and an MCP ``load_session_checkpoint`` round trip on big git repositories.

Builds git repositories of ``--sizes`` committed files (default 10,000 and 100,000) with ``--dirty`` of them
modified (default 200), saves a checkpoint in each with the session service of the tree under test, then edits
``--edited`` of the files the checkpoint lists, so the brief has drift to report. Then, per repository, every
contender is launched once per round, interleaved in a fresh random order each round:

* Python start-up: ``python -c pass`` (this virtual environment's interpreter);
* ``git status --porcelain=v2`` as the issue names it, and as the session code runs it
  (``-z --branch --untracked-files=all``);
* Python and git status in one process (``subprocess.run`` of ``git status --porcelain=v2``);
* ``checkpoint brief``, the whole process, launched as a SessionStart hook runs it (console script, working
  directory and ``CLAUDE_PROJECT_DIR`` on the project, stdout captured), with a bytecode cache; and once more
  compiling its own modules at every start (a copy of the package without ``.pyc`` files, under
  ``PYTHONDONTWRITEBYTECODE=1``, as this checkout runs when that variable is set);
* the MCP round trip: the official SDK client (``mcp.client.Client``) connected over stdio to ``checkpoint
  session``, one ``load_session_checkpoint`` call timed from the call to its parsed result, in both protocol
  eras (``--calls`` calls per round);
* connect + load: launch ``checkpoint session``, connect (``initialize``), one load; closing is not timed.

Every Python process gets a private bytecode cache (``PYTHONPYCACHEPREFIX``, filled by unmeasured launches), as
an installed package has its ``.pyc`` files. Git runs with no system or global configuration. In-process, the
service those two run (``service.save``, ``service.load``: no process start, no MCP) is timed in a child process
of the tree under test.

Target (issue 6): ``checkpoint brief`` whole-process time ≤ 1.5x (Python start-up + git status) on the same
repository: the sum of the medians of ``python -c pass`` and ``git status --porcelain=v2`` from the same run.

Run: ``.venv/bin/python benchmarks/session.py [--quick] [--sizes 10000 100000] [--rounds N] [--workdir DIR]
[--src DIR] [--candidate DIR]``. ``--workdir`` keeps the generated repositories for the next run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from stats import Summary, fmt, interleaved

TARGET_RATIO = 1.5
PYTHON = "Python start-up (`python -c pass`)"
STATUS = "`git status --porcelain=v2`"
STATUS_AS_RUN = "git status as the session code runs it"
PY_STATUS = "Python + git status, one process"
BRIEF = "`checkpoint brief`"
BRIEF_UNCACHED = "`checkpoint brief`, no .pyc"
BRIEF_CANDIDATE = "`checkpoint brief` (candidate)"
MCP_LEGACY = "MCP load round trip, 2025-11-25"
MCP_MODERN = "MCP load round trip, 2026-07-28"
MCP_CONNECT = "MCP connect + load (new server)"
MCP_CANDIDATE = "MCP load round trip, 2025-11-25 (candidate)"

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
ROOT_VARIABLES = ("CHECKPOINT_PROJECT_ROOT", "CLAUDE_PROJECT_DIR", "CHECKPOINT_DEBUG_TRIGGER")

# Runs in a child process of the tree under test: saves, then edits some listed files, then loads.
SERVICE_CODE = """
import json, sys, time
from checkpoint_mcp.session import service
from checkpoint_mcp.session.merge import CommandInput, SaveRequest
from checkpoint_mcp.session.model import Task
from checkpoint_mcp.session.root import ProjectRoot, RootSource

root, rounds, edited = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
project = ProjectRoot(root, RootSource.ARGUMENT)
request = SaveRequest(
    goal="Move the session store to the new storage layer without losing a user's session",
    mode="merge",
    tasks=(Task("Port the store", "done"), Task("Migrate the fixtures", "in_progress"), Task("Docs", "pending")),
    summary="The store is ported; two fixture suites still read the old layout. " * 4,
    next_steps=("Finish the fixture migration", "Run the whole suite", "Write the upgrade note"),
    decisions=("Keep the old reader for one release", "No schema change in this pull request"),
    recent_commands=(CommandInput("pytest tests/store -q", 0), CommandInput("pytest tests/fixtures -q", 1, "2 fail")),
)
service.load(project)  # warm the page cache, as a session that has been running would have it
saves, loads = [], []
for _ in range(rounds):
    started = time.perf_counter()
    outcome = service.save(request, project)
    saves.append((time.perf_counter() - started) * 1000)
listed = [f.path for f in outcome.checkpoint.modified_files]
for path in listed[:edited]:
    with open(f"{root}/{path}", "a", encoding="utf-8") as handle:
        handle.write("# edited after the checkpoint\\n")
for _ in range(rounds):
    started = time.perf_counter()
    loaded = service.load(project)
    loads.append((time.perf_counter() - started) * 1000)
changed = len(loaded.drift.changed_since) if loaded.drift is not None else -1
print(json.dumps({"save": saves, "load": loads, "listed": len(listed), "changed": changed}))
"""

PY_STATUS_CODE = (
    "import subprocess; subprocess.run(['git', 'status', '--porcelain=v2'], stdout=subprocess.PIPE, check=True)"
)


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="files per repository")
    parser.add_argument("--dirty", type=int, default=200, help="modified files per repository (default 200)")
    parser.add_argument("--edited", type=int, default=5, help="listed files edited after the save (default 5)")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds per repository (default 30)")
    parser.add_argument("--calls", type=int, default=3, help="MCP round trips per era per round (default 3)")
    parser.add_argument("--connects", type=int, default=10, help="rounds that also time connect + load")
    parser.add_argument("--service-rounds", type=int, default=10, help="in-process saves and loads (default 10)")
    parser.add_argument("--workdir", type=Path, default=None, help="build (and keep) the repositories here")
    parser.add_argument("--src", type=Path, default=None, help="run checkpoint from this src/ tree")
    parser.add_argument("--candidate", type=Path, default=None, help="also run checkpoint from this src/ tree")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.dirty, args.edited = [300], 20, 2
        args.rounds, args.calls, args.connects, args.service_rounds = 2, 1, 1, 1
    return args


# ---- repositories ------------------------------------------------------------------------------------------


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, env={**os.environ, **GIT_ENV}, stdout=subprocess.DEVNULL)


def _file(root: Path, index: int) -> Path:
    return root / f"pkg{index // 1000:03}" / f"mod{(index // 100) % 10}" / f"f{index:06}.py"


def build(root: Path, files: int, dirty: int) -> float:
    """A repository of ``files`` small committed files in nested folders, ``dirty`` of them then modified.

    Reused when ``root`` already holds one of the same shape (``--workdir``); returns the seconds spent.
    """
    marker = root / ".git" / "bench-shape"
    shape = f"{files} {dirty}"
    if marker.exists() and marker.read_text() == shape:
        return 0.0
    started = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    _git(root, "init", "-q")
    for i in range(files):
        path = _file(root, i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"value = {i}\n" * 20)
    (root / ".gitignore").write_text(".claude-checkpoint*\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "files")
    for i in range(0, files, max(1, files // dirty))[:dirty]:
        path = _file(root, i)
        path.write_text(path.read_text() + "# modified\n")
    marker.write_text(shape)
    return time.perf_counter() - started


def reset(root: Path) -> None:
    """Forget the previous run's checkpoint and edits: the dirty files go back to their first modification."""
    for name in (".claude-checkpoint", ".claude-checkpoint.prev"):
        (root / name).unlink(missing_ok=True)
    shape = (root / ".git" / "bench-shape").read_text().split()
    files, dirty = int(shape[0]), int(shape[1])
    for i in range(0, files, max(1, files // dirty))[:dirty]:
        path = _file(root, i)
        text = path.read_text()
        path.write_text(text[: text.index("# modified\n")] + "# modified\n")


# ---- contenders ----------------------------------------------------------------------------------------------


@dataclass
class Launch:
    """A whole process, timed from launch to exit; ``expect`` is what its stdout must start with."""

    name: str
    argv: list[str]
    env: dict[str, str]
    expect: bytes = b""
    samples: list[float] = field(default_factory=list)


def _base_env(cache: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ROOT_VARIABLES}
    env.update(GIT_ENV)
    if cache is not None:
        env.update({"PYTHONPYCACHEPREFIX": str(cache), "PYTHONDONTWRITEBYTECODE": ""})
    return env


def _checkpoint_head(src: Path | None) -> list[str]:
    """``checkpoint`` as users run it (the console script), or ``python -m checkpoint_mcp`` from a src tree."""
    script = Path(sys.executable).parent / "checkpoint"
    if src is None and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "checkpoint_mcp"]


def _with_src(env: dict[str, str], src: Path | None) -> dict[str, str]:
    return {**env, "PYTHONPATH": str(src.resolve())} if src is not None else env


def uncached_copy(src: Path | None, tmp: Path) -> Path:
    """A copy of the ``checkpoint_mcp`` package without any ``.pyc``: what a checkout runs without a cache."""
    if src is None:
        import checkpoint_mcp

        package = Path(checkpoint_mcp.__file__).parent
    else:
        package = src / "checkpoint_mcp"
    target = tmp / "uncached-src"
    if not target.exists():
        shutil.copytree(package, target / "checkpoint_mcp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def launches(args: argparse.Namespace, tmp: Path, repo: Path) -> list[Launch]:
    """The whole-process contenders for ``repo``."""
    cache = tmp / "pycache"
    env = _base_env(cache)
    project = {"CLAUDE_PROJECT_DIR": str(repo)}
    chosen = [
        Launch(PYTHON, [sys.executable, "-c", "pass"], env),
        Launch(STATUS, ["git", "status", "--porcelain=v2"], env),
        Launch(
            STATUS_AS_RUN,
            ["git", "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all", "--", "."],
            {**env, "GIT_OPTIONAL_LOCKS": "0"},
        ),
        Launch(PY_STATUS, [sys.executable, "-c", PY_STATUS_CODE], env),
        Launch(BRIEF, [*_checkpoint_head(args.src), "brief"], _with_src({**env, **project}, args.src), b"# Resuming"),
    ]
    uncached_env = {**_base_env(None), **project, "PYTHONDONTWRITEBYTECODE": "1"}
    uncached_env["PYTHONPATH"] = str(uncached_copy(args.src, tmp))
    chosen.append(Launch(BRIEF_UNCACHED, [*_checkpoint_head(args.src), "brief"], uncached_env, b"# Resuming"))
    if args.candidate is not None:
        candidate_env = _with_src({**env, **project}, args.candidate)
        chosen.append(
            Launch(BRIEF_CANDIDATE, [*_checkpoint_head(args.candidate), "brief"], candidate_env, b"# Resuming")
        )
    return chosen


def run_launch(launch: Launch, cwd: Path) -> float:
    """One launch of ``launch`` in ``cwd``, in milliseconds; its exit status and output are checked after."""
    started = time.perf_counter_ns()
    done = subprocess.run(
        launch.argv, cwd=cwd, env=launch.env, stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    elapsed = (time.perf_counter_ns() - started) / 1e6
    if done.returncode != 0 or not done.stdout.startswith(launch.expect):
        raise RuntimeError(
            f"{launch.name} failed ({done.returncode}): {done.stdout[:300]!r} {done.stderr.decode()[-2000:]}"
        )
    return elapsed


def server_params(src: Path | None, repo: Path, cache: Path) -> Any:
    """How the SDK client starts ``checkpoint session`` for ``repo``."""
    from mcp.client.stdio import StdioServerParameters

    head = _checkpoint_head(src)
    env = _with_src({**_base_env(cache), "CLAUDE_PROJECT_DIR": str(repo)}, src)
    return StdioServerParameters(command=head[0], args=[*head[1:], "session"], env=env, cwd=str(repo))


def _loaded_text(result: Any) -> str:
    if result.is_error or not result.content:
        raise RuntimeError(f"load_session_checkpoint failed: {result}")
    return str(result.content[0].text)


async def timed_load(client: Any) -> float:
    """One ``load_session_checkpoint`` round trip on a connected client, in milliseconds."""
    started = time.perf_counter_ns()
    result = await client.call_tool("load_session_checkpoint", {})
    elapsed = (time.perf_counter_ns() - started) / 1e6
    if not _loaded_text(result).startswith("# Resuming"):
        raise RuntimeError(f"unexpected brief: {_loaded_text(result)[:200]}")
    return elapsed


async def connect_and_load(params: Any) -> float:
    """Launch the server, connect, one load: milliseconds until the result (closing is not timed)."""
    from mcp.client import Client

    async with AsyncExitStack() as stack:
        started = time.perf_counter_ns()
        client = await stack.enter_async_context(Client(params, mode="legacy"))
        await client.call_tool("load_session_checkpoint", {})
        return (time.perf_counter_ns() - started) / 1e6


# ---- measurement -------------------------------------------------------------------------------------------


@dataclass
class RepoResult:
    """Everything measured on one repository, in milliseconds."""

    files: int
    dirty: int
    built_seconds: float
    service: dict[str, Any]
    samples: dict[str, list[float]]


def service_timings(args: argparse.Namespace, repo: Path, src: Path | None) -> dict[str, Any]:
    """Save (and so make the checkpoint), edit listed files, load: in-process timings from the tree under test."""
    env = _with_src(_base_env(None), src)
    done = subprocess.run(
        [sys.executable, "-c", SERVICE_CODE, str(repo), str(args.service_rounds), str(args.edited)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the in-process save/load failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def measure_repo(args: argparse.Namespace, tmp: Path, repo: Path, files: int, built: float) -> RepoResult:
    """All contenders on one repository, interleaved."""
    from mcp.client import Client

    reset(repo)
    service = service_timings(args, repo, args.src)
    chosen = launches(args, tmp, repo)
    cache = tmp / "pycache"
    samples: dict[str, list[float]] = {c.name: [] for c in chosen}
    names: list[str] = [c.name for c in chosen]
    by_name = {c.name: c for c in chosen}
    async with AsyncExitStack() as stack:
        clients = {
            MCP_LEGACY: await stack.enter_async_context(Client(server_params(args.src, repo, cache), mode="legacy")),
            MCP_MODERN: await stack.enter_async_context(Client(server_params(args.src, repo, cache), mode="auto")),
        }
        if args.candidate is not None:
            params = server_params(args.candidate, repo, cache)
            clients[MCP_CANDIDATE] = await stack.enter_async_context(Client(params, mode="legacy"))
        names += [*clients, MCP_CONNECT]
        samples.update({name: [] for name in [*clients, MCP_CONNECT]})
        for launch in chosen:  # fills the bytecode caches and the page cache
            run_launch(launch, repo)
        for client in clients.values():
            await timed_load(client)
        await connect_and_load(server_params(args.src, repo, cache))
        for round_no, name in interleaved(names, args.rounds, seed=files):
            if name in clients:
                for _ in range(args.calls):
                    samples[name].append(await timed_load(clients[name]))
            elif name == MCP_CONNECT:
                if round_no < args.connects:
                    samples[name].append(await connect_and_load(server_params(args.src, repo, cache)))
            else:
                samples[name].append(run_launch(by_name[name], repo))
    return RepoResult(files, args.dirty, built, service, samples)


async def measure(args: argparse.Namespace, tmp: Path) -> list[RepoResult]:
    """Build each repository and measure it."""
    workdir = args.workdir if args.workdir is not None else tmp / "repos"
    results = []
    for files in args.sizes:
        repo = workdir / f"repo-{files}"
        built = build(repo, files, args.dirty)
        results.append(await measure_repo(args, tmp, repo, files, built))
    return results


# ---- report --------------------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return fmt(value, 1)


def render(args: argparse.Namespace, results: Sequence[RepoResult]) -> str:
    """The tables and the targets."""
    body = [
        f"Repositories of {', '.join(f'{r.files:,}' for r in results)} committed files (small files in nested "
        f"folders), {args.dirty} of them modified; a checkpoint saved by the session service (it lists "
        f"{results[0].service['listed']} files; the cap is 100), then {args.edited} of the listed files edited, so the "
        f"brief flags them. {args.rounds} interleaved rounds per repository: one launch of each process, "
        f"{args.calls} MCP round trips per era on connected clients, and connect + load in the first "
        f"{args.connects} rounds. `checkpoint` runs with `CLAUDE_PROJECT_DIR` and its working directory on the "
        "project, as a SessionStart hook does; every Python process has a bytecode cache unless the row says "
        "otherwise. Times in ms.",
        "",
    ]
    targets = []
    for result in results:
        summaries = {name: Summary.of(values) for name, values in result.samples.items() if values}
        reference = summaries[PYTHON].median + summaries[STATUS].median
        summaries["in-process `service.load` (no process, no MCP)"] = Summary.of(result.service["load"])
        summaries["in-process `service.save`"] = Summary.of(result.service["save"])
        rows = [
            [name, _ms(s.median), _ms(s.p90), _ms(s.p99), _ms(s.minimum), f"{s.median / reference:.2f}x", str(s.count)]
            for name, s in summaries.items()
        ]
        built = f", built in {result.built_seconds:.0f} s" if result.built_seconds else ""
        body += [
            f"**{result.files:,} files, {result.dirty} modified**{built}. Python start-up + git status = "
            f"{_ms(summaries[PYTHON].median)} + {_ms(summaries[STATUS].median)} = {_ms(reference)} ms.",
            "",
            table(["Contender", "median", "p90", "p99", "min", "x (Python + git status)", "n"], rows),
            "",
        ]
        brief = summaries[BRIEF].median
        limit = TARGET_RATIO * reference
        targets.append(
            Target(
                f"`checkpoint brief` ≤ 1.5x (Python start-up + git status), {result.files:,} files",
                f"{_ms(brief)} ms vs limit {_ms(limit)} ms ({brief / reference:.2f}x)",
                brief <= limit,
            )
        )
    body.append(targets_table(targets))
    return "\n".join(body)


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "session") as tmp:
        where = machine(args.workdir if args.workdir is not None else tmp)
        results = anyio.run(measure, args, tmp)
    publish(
        args,
        "session",
        title="Session: `checkpoint brief` and the load round trip",
        argv=argv,
        where=where,
        body=render(args, results),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
