"""The official MCP conformance suite (server mode) against `checkpoint serve` in front of server-everything.

The reference upstream is first served over HTTP by itself; every scenario it passes alone must pass through the
gateway too, with as many checks, pass-through and journaled. DNS rebinding protection, which the gateway provides whatever the
upstream does, must pass in full.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gatewayproc import GatewayProcess

import nodetools
from support import DEFAULT_TIMEOUT

SUITE_TIMEOUT = 240
SUMMARY_LINE = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed$", re.MULTILINE)


def run_suite(url: str, cwd: Path) -> dict[str, tuple[int, int]]:
    """scenario -> (checks passed, checks failed), from the suite's summary."""
    done = subprocess.run(
        [*nodetools.conformance(), "server", "--url", url],
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
        env=nodetools.env(),
        cwd=cwd,
        check=False,
    )
    results = {name: (int(ok), int(bad)) for name, ok, bad in SUMMARY_LINE.findall(done.stdout + done.stderr)}
    assert results, f"no summary from the conformance suite:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return results


def passed(results: dict[str, tuple[int, int]]) -> set[str]:
    return {name for name, (ok, bad) in results.items() if ok > 0 and bad == 0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, int]]:
    """The suite's results for server-everything served over HTTP by itself."""
    port = free_port()
    server = subprocess.Popen(
        [*nodetools.package_bin("@modelcontextprotocol/server-everything", "dist/index.js"), "streamableHttp"],
        env={**nodetools.env(), "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.05)
        return run_suite(f"http://localhost:{port}/mcp", tmp_path_factory.mktemp("alone"))
    finally:
        server.kill()
        server.wait(timeout=DEFAULT_TIMEOUT)


@pytest.mark.timeout(SUITE_TIMEOUT + 60)
@pytest.mark.parametrize("journaled", [False, True], ids=["pass-through", "journaled"])
def test_every_scenario_the_upstream_passes_alone_passes_through_the_gateway(
    alone: dict[str, tuple[int, int]], tmp_path: Path, journaled: bool
) -> None:
    upstream = " ".join([*nodetools.package_bin("@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"])
    journal = ["--journal", str(tmp_path / "j.db")] if journaled else []
    with GatewayProcess("--upstream-cmd", upstream, *journal, env=nodetools.env()) as gateway:
        through = run_suite(f"http://localhost:{gateway.port}/mcp", tmp_path)
    assert len(passed(alone)) >= 10, alone  # the reference passes most scenarios alone
    missing = passed(alone) - passed(through)
    assert not missing, {name: through.get(name) for name in missing}
    # Passing is not enough: a check reported only as INFO (server-sse-streams-functional when every answer is
    # JSON) counts neither way, so the gateway must pass as many checks as the upstream alone.
    fewer = {name: (alone[name], through[name]) for name in passed(alone) if through[name][0] < alone[name][0]}
    assert not fewer, fewer
    assert through["dns-rebinding-protection"][1] == 0
    assert through["dns-rebinding-protection"][0] >= 2
