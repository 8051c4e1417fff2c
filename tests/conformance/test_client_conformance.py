"""The official MCP conformance suite in client mode, run with and without Checkpoint in the middle.

For every client scenario the suite lists, its own test server is started and ``driver.py`` is run against it:
once talking to it directly with the official SDK client, once over stdio through ``checkpoint --upstream-url
… --upstream-auth oauth``. Every scenario the driver passes without Checkpoint must pass with it, the
``auth/*`` ones (OAuth 2.1: discovery, dynamic registration, PKCE, scopes, step-up, token endpoint methods)
included, and the 2025-03-26 metadata back-compat one passes through Checkpoint though not directly (a same-origin
issuer, docs/remote.md).
"""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import nodetools

DRIVER = Path(__file__).with_name("driver.py")
SCENARIO_SECONDS = 120
# Scenarios the driver is known to pass directly; if one of them stops passing, the comparison would prove less.
CORE = {
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
    "auth/metadata-default",
    "auth/scope-step-up",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-none",
}


def client_scenarios() -> list[str]:
    listing = subprocess.run(
        [*nodetools.conformance(), "list"], check=True, capture_output=True, text=True, env=nodetools.env(), timeout=60
    ).stdout
    section = listing.split("Client scenarios", 1)[1]
    return [line.split()[1] for line in section.splitlines() if line.strip().startswith("- ")]


CHECK_LINE = re.compile(r"\[([a-z0-9-]+)\s*\] \x1b\[\d+m(SUCCESS|FAILURE|WARNING)")
REPEATS = 3  # runs of a scenario, to show that it ends the same way every time


def passes(scenario: str, through_checkpoint: bool, workdir: Path) -> bool:
    return run_scenario(scenario, through_checkpoint, workdir)[0]


def run_scenario(scenario: str, through_checkpoint: bool, workdir: Path) -> tuple[bool, dict[str, str]]:
    """Whether the scenario passed, and its checks (id -> SUCCESS, FAILURE or WARNING)."""
    workdir.mkdir(parents=True)
    flag = " --through-checkpoint" if through_checkpoint else ""
    command = f"{sys.executable} {DRIVER}{flag}"
    run = subprocess.run(
        [*nodetools.conformance(), "client", "--command", command, "--scenario", scenario],
        capture_output=True,
        text=True,
        env=nodetools.env(),
        cwd=workdir,
        timeout=SCENARIO_SECONDS,
        check=False,
    )
    (workdir / "output.txt").write_text(run.stdout + run.stderr)
    return run.returncode == 0, dict(CHECK_LINE.findall(run.stdout + run.stderr))


@pytest.mark.timeout(900)
def test_every_conformance_scenario_the_driver_passes_directly_passes_through_checkpoint(tmp_path: Path) -> None:
    scenarios = client_scenarios()
    assert set(scenarios) >= CORE
    jobs = [(scenario, through) for scenario in scenarios for through in (False, True)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(
            pool.map(lambda job: passes(job[0], job[1], tmp_path / f"{job[0].replace('/', '_')}-{int(job[1])}"), jobs)
        )
    result = dict(zip(jobs, outcomes, strict=True))
    direct = {scenario for scenario in scenarios if result[(scenario, False)]}
    through = {scenario for scenario in scenarios if result[(scenario, True)]}
    assert direct >= CORE, f"the driver itself no longer passes {sorted(CORE - direct)}"
    assert direct <= through, f"pass directly but not through Checkpoint: {sorted(direct - through)} (see {tmp_path})"
    assert "auth/2025-03-26-oauth-metadata-backcompat" in through  # the same-origin issuer, accepted (docs/remote.md)


@pytest.mark.timeout(600)
def test_the_2025_03_26_metadata_backcompat_scenario_passes_through_checkpoint_in_every_run(tmp_path: Path) -> None:
    """The suite's server is its own authorization server and names the issuer ``<origin>/oauth``.

    The SDK's client alone refuses that issuer (RFC 8414 section 3.3: not the origin its metadata was fetched
    from); Checkpoint accepts an issuer on the MCP server's own origin on this legacy path (docs/remote.md), as
    mcp-remote does, and so must pass every check, every time (it looks at that metadata once more first).
    """
    scenario = "auth/2025-03-26-oauth-metadata-backcompat"
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(lambda run: run_scenario(scenario, True, tmp_path / f"run-{run}"), range(REPEATS)))
    for passed, checks in outcomes:
        assert passed, (checks, tmp_path)
        assert set(checks.values()) == {"SUCCESS"}, (checks, tmp_path)
        assert {"authorization-server-metadata", "client-registration", "token-request"} <= set(checks)
