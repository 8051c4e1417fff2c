"""What the benchmarks put in front of the bundled upstream: the command line of each contender.

* ``direct``: the upstream alone, the baseline;
* ``checkpoint``: the proxy as a pure pass-through (no ``--journal``);
* ``journaled``: the proxy with ``--journal`` on SQLite (WAL, ``synchronous=FULL``);
* ``fastmcp``: FastMCP's stdio-to-stdio proxy, from its own virtual environment (``.venv-fastmcp``, made on first
  use: its dependencies may clash with ours).

``--candidate DIR`` (a copy of ``src/`` with a change to try) adds the same proxy runs from that tree, so a
change is measured against the current code in one interleaved run; ``--src DIR`` runs the main two from another
tree instead of the installed package (e.g. another branch, exported with ``git archive``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness import Peer

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
UPSTREAM = BENCH_DIR / "upstream_server.py"
FASTMCP_PROXY = BENCH_DIR / "fastmcp_proxy.py"
NULL_RELAY = BENCH_DIR / "null_relay.py"
NULL_RELAY_NAME = "null relay (floor)"
FASTMCP_VENV = ROOT / ".venv-fastmcp"
FASTMCP_REQUIREMENT = "fastmcp>=4,<5"


@dataclass(frozen=True)
class Contender:
    """One way to reach the upstream: a name for the tables and the command that starts it."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The child's environment: ours plus the contender's additions."""
        return {**os.environ, **self.env}


@dataclass(frozen=True)
class Upstream:
    """How the bundled upstream behaves: each tools/call takes ``delay_ms`` and returns ``result_bytes`` of text."""

    delay_ms: float = 0.0
    result_bytes: int = 0

    def argv(self) -> list[str]:
        """The command line: this interpreter (not the pyenv shim: it costs ~50 ms per start)."""
        argv = [sys.executable, str(UPSTREAM)]
        if self.delay_ms:
            argv += ["--delay-ms", str(self.delay_ms)]
        if self.result_bytes:
            argv += ["--result-bytes", str(self.result_bytes)]
        return argv


PLAIN = Upstream()


def checkpoint_argv(upstream: list[str], journal: Path | None = None) -> list[str]:
    """``checkpoint`` as users run it: the console script of this environment."""
    script = Path(sys.executable).parent / "checkpoint"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "checkpoint_mcp"]
    argv = [*head, "--upstream-cmd", shlex.join(upstream)]
    if journal is not None:
        argv += ["--journal", str(journal)]
    return argv


def direct(upstream: Upstream = PLAIN) -> Contender:
    """The upstream alone."""
    return Contender("direct", upstream.argv())


def passthrough(upstream: Upstream = PLAIN, src: Path | None = None, label: str = "checkpoint") -> Contender:
    """The proxy without a journal."""
    return Contender(label, checkpoint_argv(upstream.argv()), _src_env(src))


def journaled(
    journal: Path, upstream: Upstream = PLAIN, src: Path | None = None, label: str = "journaled"
) -> Contender:
    """The proxy journaling to ``journal``."""
    return Contender(label, checkpoint_argv(upstream.argv(), journal), _src_env(src))


def fastmcp(python: Path, upstream: Upstream = PLAIN) -> Contender:
    """FastMCP's proxy in front of the same upstream."""
    return Contender("fastmcp", [str(python), str(FASTMCP_PROXY), *upstream.argv()])


def null_relay(upstream: Upstream = PLAIN) -> Contender:
    """A byte-copying relay (``null_relay.py``): the price of one more process in the path, nothing else."""
    return Contender(NULL_RELAY_NAME, [sys.executable, str(NULL_RELAY), *upstream.argv()])


def lineup(args: argparse.Namespace, tmp: Path, upstream: Upstream = PLAIN) -> list[Contender]:
    """The four contenders (``--no-fastmcp``: three) and the null relay, plus the ``--candidate`` tree's runs."""
    src = args.src
    chosen = [
        direct(upstream),
        null_relay(upstream),
        passthrough(upstream, src=src),
        journaled(tmp / "journal.db", upstream, src=src),
    ]
    if args.candidate is not None:
        chosen.append(passthrough(upstream, src=args.candidate, label="checkpoint (candidate)"))
        chosen.append(journaled(tmp / "candidate.db", upstream, src=args.candidate, label="journaled (candidate)"))
    if not args.no_fastmcp:
        python = fastmcp_python()
        assert python is not None
        chosen.append(fastmcp(python, upstream))
    return chosen


def _src_env(src: Path | None) -> dict[str, str]:
    # PYTHONPATH comes before the editable install's path entry, so the candidate tree's package wins.
    return {"PYTHONPATH": str(src.resolve())} if src is not None else {}


def fastmcp_python(create: bool = True) -> Path | None:
    """The interpreter of the FastMCP environment, made (``pip install fastmcp``) if missing and ``create``."""
    python = FASTMCP_VENV / "bin" / "python"
    if python.exists():
        return python
    if not create:
        return None
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    print(f"making {FASTMCP_VENV} and installing {FASTMCP_REQUIREMENT} (once)...", file=sys.stderr)
    subprocess.run([str(base), "-m", "venv", str(FASTMCP_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", FASTMCP_REQUIREMENT], check=True)
    return python


def fastmcp_version(python: Path) -> str:
    """The installed fastmcp version, for the report."""
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('fastmcp'))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def start(contender: Contender, initialize: bool = True) -> Peer:
    """Start ``contender`` and (by default) complete the MCP handshake."""
    peer = Peer(contender.argv, env=contender.environment())
    if initialize:
        peer.initialize()
    return peer


def close_all(peers: dict[str, Peer]) -> None:
    """Close every peer (client EOF), waiting for each to exit."""
    for peer in peers.values():
        peer.close()


def src_option(parser: argparse.ArgumentParser) -> None:
    """``--src``: run the proxy from another ``src/`` tree."""
    parser.add_argument("--src", type=Path, default=None, help="run checkpoint from this src/ tree")


def proxy_options(parser: argparse.ArgumentParser) -> None:
    """``--src``, ``--candidate`` and ``--no-fastmcp``, for the scripts that run the whole line-up."""
    src_option(parser)
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP out")
    parser.add_argument("--candidate", type=Path, default=None, help="also run checkpoint from this src/ tree")


def make_journal(path: Path, src: Path | None = None) -> None:
    """Create an empty journal at ``path`` with the schema of the proxy that will use it (its own code does it)."""
    code = "import sys; from checkpoint_mcp.journal.sqlite import SqliteJournal; SqliteJournal(sys.argv[1]).close()"
    env = {**os.environ, **_src_env(src)}
    subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True)
