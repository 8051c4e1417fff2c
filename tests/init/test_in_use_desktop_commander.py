"""@wonderwhy-er/desktop-commander (npm, pinned), after a plain `checkpoint init` (issue 43): its start_process runs
any shell command, and the command decides. From a new session `npm test` runs again and creating a folder that
exists runs, while a webhook POST sent again (``curl -X POST`` to a loopback sink) is caught; within one session
every repeat runs. Both sides are counted: the test script counts its runs in a file, the sink counts requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from checkpoint_mcp.refusals import REPEAT_REFUSED

from .agent_sessions import Project, Session, Tally, plain_init, session
from .webhook_sink import Sink
from realservers import BY_PROFILE
from support import journal_calls, wait_until

COUNT_RUNS = "require('fs').appendFileSync(require('path').join(__dirname, 'runs.txt'), 'run\\n')"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Project, Path]:
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True)
    (work / "package.json").write_text(json.dumps({"name": "tiny", "private": True, "scripts": {"test": "node t.js"}}))
    (work / "t.js").write_text(COUNT_RUNS + "\n")
    entry = BY_PROFILE["desktop-commander"].entry(tmp_path)
    return plain_init(tmp_path / "project", {"desktop": entry}), work


def runs(work: Path) -> int:
    path = work / "runs.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.timeout(240)
def test_npm_test_and_a_folder_repeat_from_a_new_session_and_a_webhook_post_is_caught(
    project: tuple[Project, Path], sink: Sink
) -> None:
    initialized, work = project
    assert "profile @wonderwhy-er/desktop-commander 0.2.52" in initialized.summary
    policy = initialized.policy("desktop")
    assert "[[tools.start_process.when]]" in policy
    tally = Tally()
    npm_test = f"cd {work} && npm test"
    deploy_hook = f'curl -s -X POST {sink.url}/deploy -d \'{{"ref":"v1.4.0"}}\''
    ping = f"curl -s -X POST {sink.url}/ping"

    async def run(agent: Session, command: str, what: str) -> None:
        outcome = tally.meant(
            what, await agent.call("desktop", "start_process", {"command": command, "timeout_ms": 20000})
        )
        assert not outcome.is_error, outcome

    async def folder(agent: Session) -> None:
        made = await agent.call("desktop", "create_directory", {"path": str(work / "build")})
        assert not tally.meant("create_directory of an existing folder", made).is_error, made

    async def scenario() -> None:
        async with session(initialized) as first:
            await run(first, npm_test, "npm test")
            wait_until(lambda: runs(work) == 1, what="the first test run")
            await folder(first)
            await run(first, deploy_hook, "the deploy webhook")
            wait_until(lambda: sink.counted["POST /deploy"] == 1, what="the webhook")
        async with session(initialized) as second:  # a new session: the resumed agent does it all again
            await run(second, npm_test, "npm test from a new session")
            wait_until(lambda: runs(work) == 2, what="the second test run")
            await folder(second)
            again = await second.call("desktop", "start_process", {"command": deploy_hook, "timeout_ms": 20000})
            assert again.code == REPEAT_REFUSED, again
            assert "already ran" in again.text
            await run(second, npm_test, "npm test again within the session")  # the agent's own repeats: they run
            wait_until(lambda: runs(work) == 3, what="the third test run")
            await run(second, ping, "a ping")
            await run(second, ping, "the same ping again within the session")
            wait_until(lambda: sink.counted["POST /ping"] == 2, what="both pings")

    anyio.run(scenario)
    tally.effects("npm test", runs(work), 3)
    tally.effects("the deploy webhook", sink.counted["POST /deploy"], 1)
    tally.effects("the pings", sink.counted["POST /ping"], 2)
    tally.assert_clean()
    calls = journal_calls(initialized.journal, "desktop")
    rules = {json.loads(c.arguments).get("command", c.tool): c.rule for c in calls}
    assert rules[npm_test] == "tools.start_process"
    assert rules[deploy_hook] == "tools.start_process.when.http-write"
    assert rules[ping] == "tools.start_process.when.http-write"
