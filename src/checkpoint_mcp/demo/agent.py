"""The demo's scripted agent: it drives the demo mailer through `checkpoint` with the official MCP SDK client.

The proxy runs with a tool policy (``POLICY``): e-mails in doubt are settled by asking the mail service's
read-only ``list_outbox``, card charges by the card service's own idempotency key, and an e-mail repeated by an
agent that names no sequence is refused.

Act 1: the agent runs a four-step workflow; the machine "crashes" (the proxy SIGKILLs itself through a debug
trigger) right after the card service charged step 2, before the journal could record it.
Act 2: the restarted agent runs its script again from the top: step 1 is replayed, step 2 (in doubt) is sent
again under the same idempotency key, so the card is not charged twice; then it crashes again right after the
mail service sent step 3.
Act 3: restarted once more, the proxy asks the outbox whether step 3's e-mail went out: it did, so it is recorded
as done and not sent again; step 4 runs. No operator step.
Act 4: after a /clear, an agent that remembers nothing and names no sequence sends Bob's invoice again: the
proxy recognises the call by its content and refuses it.
Epilogue: before act 1 the agent saved a session checkpoint (goal, next steps) in the demo's folder, a git
repository; the demo ends with the resume brief a fresh session gets: both halves, the session's goal and next
steps beside the journal's calls done, and the two in-doubt calls the policy settled by itself, and how.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import click
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import RequestParamsMeta

from checkpoint_mcp.debug import ENV_VAR as TRIGGER_ENV
from checkpoint_mcp.refusals import IN_DOUBT, REPEAT_REFUSED

Step = tuple[str, dict[str, Any]]

SCRIPT: list[Step] = [
    ("send_email", {"to": "alice@example.com", "subject": "Your order has shipped"}),
    ("charge_card", {"customer": "alice", "cents": 4200}),
    ("send_email", {"to": "bob@example.com", "subject": "Your invoice"}),
    ("send_email", {"to": "carol@example.com", "subject": "Thanks for your feedback"}),
]

POLICY = """\
# The demo's tool policies (every key: docs/policies.md).

[tools.send_email]
repeat = "refuse"          # the same e-mail again from an agent that names no sequence: refused, never re-sent

[tools.send_email.probe]   # an e-mail in flight at a crash: ask the outbox whether it went out
tool = "list_outbox"
arguments = { to = "/to", subject = "/subject" }
happened_if = { pointer = "/count", equals = 1 }
not_happened_if = { pointer = "/count", equals = 0 }

[tools.charge_card]        # a charge in flight at a crash: send it again with the same key; the card service
idempotency = { argument = "idempotency_key" }    # charges a key once

[tools.list_outbox]        # reading the outbox changes nothing: never journaled, never a repeat, fit to be a probe
journal = false
read_only = true
"""


def _seq(seq: int) -> RequestParamsMeta:
    """The ``_meta`` that pins a call to a journal sequence."""
    return RequestParamsMeta(checkpoint_seq=seq)  # type: ignore[typeddict-unknown-key]


def say(text: str = "", **style: Any) -> None:
    """One line of the demo's narration (the demo does not speak MCP, so stdout is free)."""
    click.secho(text, **style)


def _describe(step: Step) -> str:
    name, args = step
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


class Demo:
    """Paths and process settings shared by every act."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.journal = workdir / "journal.db"
        self.outbox = workdir / "outbox.txt"
        self.ledger = workdir / "ledger.txt"
        self.policy = workdir / "policy.toml"
        for path in (self.outbox, self.ledger):
            path.touch()
        self.policy.write_text(POLICY)

    def client(self, crash_at: str | None = None) -> AbstractAsyncContextManager[Client]:
        upstream = shlex.join([sys.executable, "-m", "checkpoint_mcp.demo.mailer"])
        env = {**os.environ, "DEMO_OUTBOX": str(self.outbox), "DEMO_LEDGER": str(self.ledger)}
        env.pop(TRIGGER_ENV, None)
        if crash_at:
            env[TRIGGER_ENV] = crash_at
        args = ["-m", "checkpoint_mcp", "--upstream-cmd", upstream, "--journal", str(self.journal)]
        params = StdioServerParameters(command=sys.executable, args=[*args, "--policy", str(self.policy)], env=env)
        return Client(params, mode="legacy")

    def session_setup(self) -> Any:
        """The session code's view of this demo's journal, as `checkpoint brief --journal` would have it."""
        from checkpoint_mcp.session import journals

        return journals.configured(
            [journals.JournalSpec(str(self.journal))], root=str(self.workdir), environ={}, cwd=str(self.workdir)
        )

    def side_effects(self) -> None:
        say("  What really happened (the mail service's outbox and the card ledger):", dim=True)
        for line in self.outbox.read_text().splitlines() + self.ledger.read_text().splitlines():
            say(f"    • {line}", dim=True)


async def _run_script(demo: Demo, crash_at: str | None = None) -> None:
    """The agent's script from the top, each step pinned to its sequence; narrates what the proxy did."""
    async with demo.client(crash_at=crash_at) as client:
        for seq, step in enumerate(SCRIPT, 1):
            try:
                result = await client.call_tool(step[0], step[1], meta=_seq(seq))
            except MCPError as exc:
                say(f"  step {seq}: {_describe(step)}")
                if exc.code == IN_DOUBT:
                    say(f"    ✋ refused, in doubt: {exc.message}", fg="yellow")
                    continue
                say(f"    💥 the machine crashed mid-call ({exc.message}).", fg="red")
                return
            meta = result.meta or {}
            info = meta.get("checkpoint/journal", {})
            text = result.content[0].text  # type: ignore[union-attr]
            if "checkpoint/settled" in meta:
                probe = meta["checkpoint/settled"]["probe"]
                say(f"  step {seq}: {_describe(step)}", fg="green")
                say(f"    ✓ it was in doubt; {probe} shows it went out, so it is recorded as done, not sent again")
            elif info.get("replayed"):
                say(f"  step {seq}: {_describe(step)} → replayed from the journal, nothing sent", fg="green")
            else:
                say(f"  step {seq}: {_describe(step)} → {text}", fg="green")


async def _act_one(demo: Demo) -> None:
    say("Act 1 — an agent runs a four-step workflow through checkpoint.", bold=True)
    say(f"  (journal: {demo.journal}; tool policy: {demo.policy})")
    # Crash right after the card service answered step 2, before the journal recorded it.
    await _run_script(demo, crash_at="after_upstream_reply@2")
    demo.side_effects()
    say("  Alice's card was charged, but the journal only knows the charge was in flight: it is in doubt.")
    say()


async def _act_two(demo: Demo) -> None:
    say("Act 2 — the agent restarts and runs its script again from the top.", bold=True)
    say("  Step 2 is in doubt. Every charge went out with an idempotency key derived from the workflow and the")
    say("  step, so the proxy sends it again with the same key: the card service knows the key and charges nothing.")
    # This time the machine crashes right after the mail service sent step 3 (the 2nd answer of this run).
    await _run_script(demo, crash_at="after_upstream_reply@2")
    demo.side_effects()
    say("  One charge only. But Bob's e-mail went out just before the crash: now step 3 is in doubt.")
    say()


async def _act_three(demo: Demo) -> None:
    say("Act 3 — the agent restarts once more. Nobody runs any command.", bold=True)
    say("  Step 3 is in doubt. The proxy asks the mail service's read-only list_outbox whether it went out.")
    await _run_script(demo)
    demo.side_effects()
    say()


async def _act_four(demo: Demo) -> None:
    say("Act 4 — after a /clear, an agent that remembers nothing sends Bob's invoice again.", bold=True)
    say("  Like most agents (Claude Code, LangChain…), it passes no sequence and no key: only the arguments.")
    to, subject = SCRIPT[2][1]["to"], SCRIPT[2][1]["subject"]
    async with demo.client() as client:
        say(f"  {_describe(SCRIPT[2])}")
        try:
            result = await client.call_tool("send_email", {"to": to, "subject": subject})
        except MCPError as exc:
            if exc.code == REPEAT_REFUSED:
                say(f"    ✋ caught: the same e-mail went out as call #{exc.data['original']['seq']}; not sent again.")
            else:
                say(f"    error {exc.code}: {exc.message}", fg="red")
        else:
            say(f"    ran: {result.content[0].text}", fg="red")  # type: ignore[union-attr]
    demo.side_effects()
    say()


GIT_IDENTITY = ["-c", "user.name=Checkpoint demo", "-c", "user.email=demo@example.com"]


def _git(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=workdir, capture_output=True, text=True, check=False, timeout=30)


def save_session(demo: Demo) -> None:
    """Before act 1, the agent saves a session checkpoint in the demo's folder (a git repository, made if needed)."""
    from checkpoint_mcp.session import service
    from checkpoint_mcp.session.merge import SaveRequest
    from checkpoint_mcp.session.model import Task
    from checkpoint_mcp.session.root import ProjectRoot, RootSource

    if _git(demo.workdir, "rev-parse", "--is-inside-work-tree").returncode != 0:
        _git(demo.workdir, "init", "-q")
        ignored = [".claude-checkpoint*", "journal.db*", "outbox.txt", "ledger.txt", "policy.toml"]
        (demo.workdir / ".gitignore").write_text("".join(f"{name}\n" for name in ignored))
        _git(demo.workdir, "add", ".gitignore")
        _git(demo.workdir, *GIT_IDENTITY, "commit", "-qm", "order 1042")
    request = SaveRequest(
        goal="Ship order 1042: tell Alice, charge her card, invoice Bob, thank Carol",
        tasks=(Task("Order 1042 workflow", "in_progress"),),
        next_steps=tuple(_describe(step) for step in SCRIPT),
        decisions=("Every step goes through the journaled mailer, so a restart never sends twice",),
    )
    root = ProjectRoot(str(demo.workdir.resolve()), RootSource.ARGUMENT)
    service.save(request, root, setup=demo.session_setup())


def resume_brief(demo: Demo) -> str:
    """The brief a fresh session gets now: `checkpoint brief` with the demo's journal."""
    from checkpoint_mcp.session import service
    from checkpoint_mcp.session.root import ProjectRoot, RootSource

    root = ProjectRoot(str(demo.workdir.resolve()), RootSource.ARGUMENT)
    return service.load(root, setup=demo.session_setup()).text


def _epilogue(brief: str) -> None:
    say("Epilogue — the other half: what a fresh session is told now.", bold=True)
    say("  Before act 1 the agent had saved a session checkpoint (its goal and next steps). The resume brief")
    say("  (`checkpoint brief --journal journal.db`, or load_session_checkpoint) joins it with the journal:")
    say()
    for line in brief.splitlines():
        say(f"    {line}", dim=not line.startswith(("##", "- #")))
    say()
    say('  The next steps say "charge the card, send the invoice"; the journal says both are done, and that the')
    say("  proxy settled them itself and how: the resumed agent neither repeats them nor forgets them.")


def run_demo(workdir: str | None) -> None:
    """Run every act in ``workdir`` (a fresh temporary folder when None)."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="checkpoint-demo-") as tmp:
            _run(Path(tmp))
    else:
        path = Path(workdir)
        path.mkdir(parents=True, exist_ok=True)
        _run(path)


def _run(workdir: Path) -> None:
    demo = Demo(workdir)
    save_session(demo)
    anyio.run(_act_one, demo)
    anyio.run(_act_two, demo)
    anyio.run(_act_three, demo)
    anyio.run(_act_four, demo)
    outbox = demo.outbox.read_text().splitlines()
    ledger = demo.ledger.read_text().splitlines()
    say("Result:", bold=True)
    say(f"  The script ran three times and once more from scratch, yet {len(outbox)} e-mails went out and")
    say(f"  {len(ledger)} card charge(s) happened: no side effect happened twice. The two calls in flight at the")
    say("  crashes were settled by the services themselves (the outbox, the card's idempotency key), never")
    say("  guessed, and no operator had to step in.")
    say()
    _epilogue(resume_brief(demo))
