"""What the protection is for, after a plain `checkpoint init`: a mail server whose ``send_email`` carries no hints
(so init protects it) sends each e-mail the agent meant exactly once. The same e-mail from a new session, or after
a ``/clear``, is refused; a re-send after the client timed out is caught; a send the server reported as failed
("SMTP 451 ... nothing was sent") is no side effect, so its retry runs, once, and is then protected like any send.
The outbox (``sent.jsonl``, written by the server before it answers) is the truth.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import REPEAT_REFUSED

from .agent_sessions import Project, Tally, plain_init, session
from support import journal_calls

MAILBOX = Path(__file__).resolve().parents[1] / "servers" / "mailbox_server.py"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}


@dataclass
class Mailbox:
    """The project, the outbox, and the two switches: ``fail`` (while it exists, a send reports SMTP 451 and sends
    nothing) and ``hold`` (while it is missing, a send goes out and its answer waits)."""

    project: Project
    outbox: Path
    fail: Path
    hold: Path

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def mailbox(tmp_path: Path) -> Mailbox:
    hold, fail = tmp_path / "release", tmp_path / "smtp-down"
    env = {"MAILBOX_DIR": str(tmp_path / "mailbox"), "MAILBOX_HOLD": str(hold), "MAILBOX_FAIL": str(fail)}
    project = plain_init(
        tmp_path / "project", {"mailbox": {"command": sys.executable, "args": [str(MAILBOX)], "env": env}}
    )
    hold.touch()
    return Mailbox(project, tmp_path / "mailbox" / "sent.jsonl", fail, hold)


def test_init_protects_the_unhinted_send_and_says_to_review_it(mailbox: Mailbox) -> None:
    assert "review first: mailbox's tools send_email have no hints" in mailbox.project.summary
    [row] = [line for line in mailbox.project.summary.splitlines() if line.startswith("  mailbox ")]
    assert row.split()[1:6] == ["2", "1", "0", "0", "1"], "2 tools: list_outbox reads, send_email is protected"


@pytest.mark.timeout(120)
def test_the_same_email_from_a_new_session_is_refused_and_goes_out_once(mailbox: Mailbox) -> None:
    tally = Tally()

    async def scenario() -> None:
        async with session(mailbox.project) as first:
            sent = tally.meant("send_email", await first.call("mailbox", "send_email", MAIL))
            assert sent.text == "sent 'Your invoice' to bob@example.com"
        async with session(mailbox.project) as second:  # after a crash: the resumed agent sends it again
            again = await second.call("mailbox", "send_email", MAIL)
            assert again.code == REPEAT_REFUSED, again
            assert "send_email" in again.text
            assert "already ran" in again.text
            count = await second.call("mailbox", "list_outbox", {"to": MAIL["to"], "subject": MAIL["subject"]})
            assert tally.meant("list_outbox", count).text == "1 mail(s)"

    anyio.run(scenario)
    tally.effects("the invoice e-mail", len(mailbox.sent()), 1)
    tally.assert_clean()


@pytest.mark.timeout(120)
def test_the_same_email_after_a_clear_is_refused_though_the_servers_live_on(mailbox: Mailbox) -> None:
    tally = Tally()

    async def scenario() -> None:
        async with session(mailbox.project) as agent:
            tally.meant("send_email", await agent.call("mailbox", "send_email", MAIL))
            agent.clear()  # the conversation is gone; the same processes serve the next one
            again = await agent.call("mailbox", "send_email", MAIL)
            assert again.code == REPEAT_REFUSED, again

    anyio.run(scenario)
    tally.effects("the invoice e-mail", len(mailbox.sent()), 1)
    tally.assert_clean()


@pytest.mark.timeout(120)
def test_a_send_that_reported_a_failure_is_retried_in_the_same_session_and_goes_out_once(mailbox: Mailbox) -> None:
    tally = Tally()
    mailbox.fail.touch()

    async def scenario() -> None:
        async with session(mailbox.project) as agent:
            failed = await agent.call("mailbox", "send_email", MAIL)
            assert (failed.is_error, failed.text) == (True, "SMTP 451 try again later: nothing was sent"), failed
            mailbox.fail.unlink()  # the mail server is back
            retried = tally.meant("the retry of send_email", await agent.call("mailbox", "send_email", MAIL))
            assert retried.refused or retried.text == "sent 'Your invoice' to bob@example.com", retried
        async with session(mailbox.project) as later:  # it went out on its retry: a later session is refused
            again = await later.call("mailbox", "send_email", MAIL)
            assert again.code == REPEAT_REFUSED, again

    anyio.run(scenario)
    tally.effects("the invoice e-mail", len(mailbox.sent()), 1)
    tally.assert_clean()


@pytest.mark.timeout(120)
def test_a_send_that_reported_a_failure_runs_when_a_later_session_retries_it_and_only_then(mailbox: Mailbox) -> None:
    tally = Tally()
    mailbox.fail.touch()

    async def scenario() -> None:
        async with session(mailbox.project) as first:
            failed = await first.call("mailbox", "send_email", MAIL)
            assert failed.is_error, failed
        mailbox.fail.unlink()
        async with session(mailbox.project) as second:  # the resumed agent retries what failed: nothing was sent
            tally.meant("the retry of send_email in a new session", await second.call("mailbox", "send_email", MAIL))
        async with session(mailbox.project) as third:
            again = await third.call("mailbox", "send_email", MAIL)
            assert again.code == REPEAT_REFUSED, again

    anyio.run(scenario)
    tally.effects("the invoice e-mail", len(mailbox.sent()), 1)
    tally.assert_clean()


@pytest.mark.timeout(120)
def test_a_send_the_client_timed_out_on_and_sent_again_goes_out_once(mailbox: Mailbox) -> None:
    tally = Tally()
    mailbox.hold.unlink()  # the mail goes out, its answer waits

    async def scenario() -> None:
        async with session(mailbox.project) as agent:
            gave_up = await agent.call("mailbox", "send_email", MAIL, timeout=2)
            assert gave_up.refused, f"the client was to give up on the call: {gave_up}"
            assert len(mailbox.sent()) == 1, "the mail went out before the client gave up"
            resent = await agent.call("mailbox", "send_email", MAIL)  # the client's own retry: the same call again
            assert resent.refused, f"a re-send of a call whose answer never came ran: {resent}"
            mailbox.hold.touch()  # the first call finishes now; its answer reaches no one
            deadline = time.monotonic() + 30
            while [row.state for row in journal_calls(mailbox.project.journal, "mailbox")] != [CallState.COMPLETED]:
                assert time.monotonic() < deadline, journal_calls(mailbox.project.journal, "mailbox")
                await anyio.sleep(0.05)
            again = await agent.call("mailbox", "send_email", MAIL)
            assert again.code == REPEAT_REFUSED, f"its answer never reached the client: the call is caught ({again})"
        async with session(mailbox.project) as later:
            assert (await later.call("mailbox", "send_email", MAIL)).code == REPEAT_REFUSED

    anyio.run(scenario)
    tally.effects("the invoice e-mail", len(mailbox.sent()), 1)
    tally.assert_clean()
