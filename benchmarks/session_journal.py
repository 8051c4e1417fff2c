"""Session + journal: ``checkpoint brief`` with one SQLite journal of ``--rows`` calls, against the same brief without.

Builds a git repository of ``--files`` committed files (``--dirty`` modified) and a real SQLite journal of
``--rows`` calls in one workflow (written through the journal's own unit of work, as a proxy writes them), saves
a checkpoint with the journal configured (so the file records where the workflow stood), then journals
``--since`` more calls, the last one left PENDING, so the brief has a side-effects section to render. A second
repository holds a checkpoint saved without the journal: its brief must read the journal by time (a scan).

Contenders, each launched once per round in a fresh random order, as a SessionStart hook runs them (console
script, working directory and ``CLAUDE_PROJECT_DIR`` on the project, bytecode cache):

* ``checkpoint brief`` with no journal configured (the reference);
* ``checkpoint brief --journal J --workflow-id W`` on the checkpoint that recorded the journal's position;
* the same on the checkpoint that did not (read by the journal's clock: every row is scanned);
* ``python -c pass`` and ``python -c "import sqlite3"``, to attribute the difference.

Target (issue 12): the brief with the journal ≤ 1.2x the brief without, on the same repository.

Run: ``.venv/bin/python benchmarks/session_journal.py [--quick] [--rows N] [--files N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from report import Target, common_arguments, machine, publish, scratch_dir, table, targets_table
from session import GIT_ENV, Launch, _base_env, _checkpoint_head, build, run_launch
from stats import Summary, fmt, interleaved

TARGET_RATIO = 1.2
WORKFLOW = "bench"
PLAIN = "`checkpoint brief`, no journal"
MARKED = "`checkpoint brief --journal`, position saved"
BY_TIME = "`checkpoint brief --journal`, no position (by time)"
PYTHON = "Python start-up (`python -c pass`)"
SQLITE = '`python -c "import sqlite3"`'

# Runs in a child process: the journal written as a proxy writes it, in units of 1,000 calls.
WRITE_CODE = """
import json, sys
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.conditions import NewCall
from checkpoint_mcp.journal.records import CallState
path, workflow, start, count, pending = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
journal = open_journal(path)
lineage = journal.lineage(workflow)
ownership = journal.acquire(lineage.root)
unit = journal.unit()
for seq in range(start, start + count):
    tool = "send_email" if seq % 3 else "charge_card"
    arguments = json.dumps({"to": f"user{seq}@example.com", "subject": f"Your invoice number {seq}"})
    unit.reserve(workflow, seq, NewCall(tool, arguments, f"{seq:064x}"))
    if not (pending == "last" and seq == start + count - 1):
        result = {"content": [{"type": "text", "text": f"sent {seq}"}]}
        unit.finish(workflow, seq, CallState.COMPLETED, json.dumps(result))
    if seq % 1000 == 0:
        unit.commit()
unit.commit()
ownership.release()
journal.close()
"""

SAVE_CODE = """
import sys
from checkpoint_mcp.session import journals, service
from checkpoint_mcp.session.merge import SaveRequest
from checkpoint_mcp.session.root import ProjectRoot, RootSource
root, journal, workflow = sys.argv[1], sys.argv[2], sys.argv[3]
specs = [journals.JournalSpec(journal, workflow)] if journal else []
setup = journals.configured(specs, root=root, environ={}, cwd=root)
request = SaveRequest(goal="Send this month's invoices", next_steps=("Send the remaining invoices", "Reconcile"))
service.save(request, ProjectRoot(root, RootSource.ARGUMENT), setup=setup)
"""


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_arguments(parser)
    parser.add_argument("--rows", type=int, default=100_000, help="calls in the journal before the save")
    parser.add_argument("--since", type=int, default=20, help="calls journaled after the save (the last PENDING)")
    parser.add_argument("--files", type=int, default=1_000, help="files in the repository (default 1,000)")
    parser.add_argument("--dirty", type=int, default=20, help="modified files (default 20)")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds (default 30)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.since, args.files, args.dirty, args.rounds = 2_000, 5, 100, 5, 2
    return args


def _child(code: str, *argv: str) -> None:
    subprocess.run([sys.executable, "-c", code, *argv], check=True, env={**_base_env(None), **GIT_ENV})


def prepare(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path, Path, float]:
    """The journal, the repository whose checkpoint recorded its position, and one whose checkpoint did not."""
    started = time.perf_counter()
    journal = tmp / "journal.db"
    marked, by_time = tmp / "marked", tmp / "by-time"
    build(marked, args.files, args.dirty)
    build(by_time, args.files, args.dirty)
    _child(WRITE_CODE, str(journal), WORKFLOW, "1", str(args.rows), "none")
    _child(SAVE_CODE, str(marked), str(journal), WORKFLOW)
    _child(SAVE_CODE, str(by_time), "", "")
    _child(WRITE_CODE, str(journal), WORKFLOW, str(args.rows + 1), str(args.since), "last")
    return journal, marked, by_time, time.perf_counter() - started


def launches(tmp: Path, journal: Path, marked: Path, by_time: Path) -> list[tuple[Launch, Path]]:
    """Each contender and the project it runs in."""
    env = {k: v for k, v in _base_env(tmp / "pycache").items() if not k.startswith("CHECKPOINT_")}
    head = [*_checkpoint_head(None), "brief"]
    option = ["--journal", str(journal), "--workflow-id", WORKFLOW]
    return [
        (Launch(PLAIN, head, {**env, "CLAUDE_PROJECT_DIR": str(marked)}, b"# Resuming"), marked),
        (Launch(MARKED, [*head, *option], {**env, "CLAUDE_PROJECT_DIR": str(marked)}, b"# Resuming"), marked),
        (Launch(BY_TIME, [*head, *option], {**env, "CLAUDE_PROJECT_DIR": str(by_time)}, b"# Resuming"), by_time),
        (Launch(PYTHON, [sys.executable, "-c", "pass"], env), marked),
        (Launch(SQLITE, [sys.executable, "-c", "import sqlite3"], env), marked),
    ]


def check(launch: Launch, cwd: Path) -> None:
    """The journaled briefs really carry the side-effects section (one unmeasured launch)."""
    done = subprocess.run(launch.argv, cwd=cwd, env=launch.env, capture_output=True, text=True, check=True)
    if launch.name in (MARKED, BY_TIME) and "### ⚠ In doubt" not in done.stdout:
        raise RuntimeError(f"{launch.name}: no side-effects section in {done.stdout[-500:]!r}")


def main(argv: list[str]) -> int:
    """Run the benchmark and publish its section."""
    args = parse(argv)
    with scratch_dir(args, "session_journal") as tmp:
        where = machine(tmp)
        journal, marked, by_time, built = prepare(args, tmp)
        contenders = launches(tmp, journal, marked, by_time)
        for launch, cwd in contenders:  # fill the bytecode cache and the page cache; check the output
            check(launch, cwd)
        by_name = {launch.name: (launch, cwd) for launch, cwd in contenders}
        for _, name in interleaved(list(by_name), args.rounds, seed=12):
            launch, cwd = by_name[name]
            launch.samples.append(run_launch(launch, cwd))
        size = journal.stat().st_size
    summaries = {name: Summary.of(launch.samples) for name, (launch, _) in by_name.items()}
    reference = summaries[PLAIN].median
    rows = [
        [name, fmt(s.median, 1), fmt(s.p90, 1), fmt(s.minimum, 1), f"{s.median / reference:.2f}x", str(s.count)]
        for name, s in summaries.items()
    ]
    marked_ms = summaries[MARKED].median
    target = Target(
        f"`checkpoint brief` with a {args.rows:,}-row SQLite journal ≤ {TARGET_RATIO}x without",
        f"{fmt(marked_ms, 1)} ms vs limit {fmt(TARGET_RATIO * reference, 1)} ms ({marked_ms / reference:.2f}x)",
        marked_ms <= TARGET_RATIO * reference,
    )
    body = "\n".join(
        [
            f"A repository of {args.files:,} files ({args.dirty} modified) and an SQLite journal of {args.rows:,} "
            f"calls in one workflow ({size / 1e6:.0f} MB), with {args.since} more calls journaled after the save, "
            f"the last one in doubt; prepared in {built:.0f} s. {args.rounds} interleaved rounds, one launch of "
            "each contender per round; times in ms, whole processes.",
            "",
            table(["Contender", "median", "p90", "min", "x (brief without a journal)", "n"], rows),
            "",
            targets_table([target], issue=12),
        ]
    )
    publish(
        args,
        "session_journal",
        title="Session + journal: `checkpoint brief` with a 100,000-row journal",
        argv=argv,
        where=where,
        body=body,
    )
    print(json.dumps({name: s.median for name, s in summaries.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
