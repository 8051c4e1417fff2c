"""The demo's scripted agent: it drives the demo mailer through `checkpoint` with the official MCP SDK client.

Act 1: the agent runs a four-step workflow; the machine "crashes" (the proxy SIGKILLs itself through a debug
trigger) right after the mail server sent step 3 but before the journal could record it.
Act 2: a restarted agent runs its script again from the top, with a changed amount at step 2 (a bug), and the
proxy replays step 1, refuses the changed call as a divergence, refuses step 3 as in doubt, and runs step 4.
Act 3: an operator finds Bob's mail in the outbox and records step 3 as completed; the fixed agent runs once more
and every step is answered from the journal.
Epilogue: before act 1 the agent saved a session checkpoint (goal, next steps) in the demo's folder, a git
repository; the demo ends with the resume brief a fresh session got right after the crash: both halves, the
session's goal and next steps beside the journal's in-doubt e-mail and completed calls.
"""

from __future__ import annotations

import json
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
from checkpoint_mcp.errors import DIVERGENCE, IN_DOUBT

Step = tuple[str, dict[str, Any]]

SCRIPT: list[Step] = [
    ("send_email", {"to": "alice@example.com", "subject": "Your order has shipped"}),
    ("charge_card", {"customer": "alice", "cents": 4200}),
    ("send_email", {"to": "bob@example.com", "subject": "Your invoice"}),
    ("send_email", {"to": "carol@example.com", "subject": "Thanks for your feedback"}),
]
BUGGY_STEP_2: Step = ("charge_card", {"customer": "alice", "cents": 9900})


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
    """Paths and process settings shared by both acts."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.journal = workdir / "journal.db"
        self.outbox = workdir / "outbox.txt"
        self.ledger = workdir / "ledger.txt"
        for path in (self.outbox, self.ledger):
            path.touch()

    def client(self, crash_at: str | None = None) -> AbstractAsyncContextManager[Client]:
        upstream = shlex.join([sys.executable, "-m", "checkpoint_mcp.demo.mailer"])
        env = {**os.environ, "DEMO_OUTBOX": str(self.outbox), "DEMO_LEDGER": str(self.ledger)}
        env.pop(TRIGGER_ENV, None)
        if crash_at:
            env[TRIGGER_ENV] = crash_at
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "checkpoint_mcp", "--upstream-cmd", upstream, "--journal", str(self.journal)],
            env=env,
        )
        return Client(params, mode="legacy")

    def session_setup(self) -> Any:
        """The session code's view of this demo's journal, as `checkpoint brief --journal` would have it."""
        from checkpoint_mcp.session import journals

        return journals.configured(
            [journals.JournalSpec(str(self.journal))], root=str(self.workdir), environ={}, cwd=str(self.workdir)
        )

    def side_effects(self) -> None:
        say("  What really happened (the mail server's outbox and the card ledger):", dim=True)
        for line in self.outbox.read_text().splitlines() + self.ledger.read_text().splitlines():
            say(f"    • {line}", dim=True)


async def _act_one(demo: Demo) -> None:
    say("Act 1 — an agent runs a four-step workflow through checkpoint.", bold=True)
    say(f"  (journal: {demo.journal})")
    # Crash right after the mail server answered step 3, before the journal recorded it.
    async with demo.client(crash_at="after_upstream_reply@3") as client:
        for seq, step in enumerate(SCRIPT, 1):
            try:
                result = await client.call_tool(step[0], step[1], meta=_seq(seq))
            except MCPError as exc:
                say(f"  step {seq}: {_describe(step)}")
                say(f"    💥 the machine crashed mid-call ({exc.message}).", fg="red")
                break
            say(f"  step {seq}: {_describe(step)} → {result.content[0].text}")  # type: ignore[union-attr]
    demo.side_effects()
    say("  Bob's e-mail went out, but the journal only knows the call was in flight: it is in doubt.")
    say()


async def _act_two(demo: Demo) -> None:
    say("Act 2 — the agent restarts and runs its script again from the top.", bold=True)
    say("  (its step 2 now has a bug: a different amount)")
    script = [SCRIPT[0], BUGGY_STEP_2, SCRIPT[2], SCRIPT[3]]
    async with demo.client() as client:
        for seq, step in enumerate(script, 1):
            say(f"  step {seq}: {_describe(step)}")
            try:
                result = await client.call_tool(step[0], step[1], meta=_seq(seq))
            except MCPError as exc:
                if exc.code == DIVERGENCE:
                    say(f"    ✋ refused, divergence: {'; '.join(exc.data['difference'])}", fg="yellow")
                    say("       the journal holds another call at this step, so checkpoint will not run this one.")
                elif exc.code == IN_DOUBT:
                    say("    ✋ refused, in doubt: it was in flight at the crash and may have run.", fg="yellow")
                    say("       an operator checks the upstream, then runs one of:")
                    for key in ("completed", "failed", "release"):
                        say(f"         $ {exc.data['resolve'][key]}", dim=True)
                else:
                    say(f"    error {exc.code}: {exc.message}", fg="red")
                continue
            info = (result.meta or {}).get("checkpoint/journal", {})
            how = "replayed from the journal, mail server not called" if info.get("replayed") else "ran upstream"
            say(f"    ✓ {result.content[0].text} ({how})", fg="green")  # type: ignore[union-attr]
    demo.side_effects()
    say()


def _act_three(demo: Demo) -> None:
    say("Act 3 — an operator reconciles the in-doubt call, and the fixed agent runs once more.", bold=True)
    say("  Bob's mail is in the outbox, so step 3 did happen. The operator records that:")
    result = demo.workdir / "step3-result.json"
    text = "sent 'Your invoice' to bob@example.com"
    # What the tool would have answered, structured content included (clients check it against the output schema).
    result.write_text(json.dumps({"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}))
    argv = ["journal", "resolve", "--journal", str(demo.journal), "3"]  # the journal's default workflow
    argv += ["--completed", "--result-file", str(result)]
    say(f"  $ checkpoint {shlex.join(argv)}", dim=True)
    done = subprocess.run(
        [sys.executable, "-m", "checkpoint_mcp", *argv], capture_output=True, text=True, check=False, timeout=60
    )
    say(f"  {done.stdout.strip() or done.stderr.strip()}")
    anyio.run(_rerun_fixed, demo)


async def _rerun_fixed(demo: Demo) -> None:
    async with demo.client() as client:
        for seq, step in enumerate(SCRIPT, 1):
            result = await client.call_tool(step[0], step[1], meta=_seq(seq))
            replayed = (result.meta or {}).get("checkpoint/journal", {}).get("replayed")
            how = "replayed from the journal" if replayed else "ran upstream"
            say(f"  step {seq}: {_describe(step)} → {how}", fg="green")
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
        ignored = [".claude-checkpoint*", "journal.db*", "outbox.txt", "ledger.txt", "step3-result.json"]
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
    say("Epilogue — the other half: what a fresh session was told right after the crash in act 1.", bold=True)
    say("  Before act 1 the agent had saved a session checkpoint (its goal and next steps). The resume brief")
    say("  (`checkpoint brief --journal journal.db`, or load_session_checkpoint) joins it with the journal:")
    say()
    for line in brief.splitlines():
        say(f"    {line}", dim=not line.startswith(("##", "- #")))
    say()
    say('  The next steps say "send the invoice"; the journal says that e-mail is in doubt and the earlier')
    say("  steps are done: the resumed agent neither repeats them nor forgets them.")


def run_demo(workdir: str | None) -> None:
    """Run both acts in ``workdir`` (a fresh temporary folder when None)."""
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
    brief = resume_brief(demo)
    anyio.run(_act_two, demo)
    _act_three(demo)
    outbox = demo.outbox.read_text().splitlines()
    ledger = demo.ledger.read_text().splitlines()
    say("Result:", bold=True)
    say(f"  The script ran three times, yet {len(outbox)} e-mails went out and {len(ledger)} card charge(s) happened:")
    say("  no side effect happened twice; the changed call and the in-doubt call were surfaced, not guessed;")
    say("  and once a human had said what happened, the journal answered for it.")
    say()
    _epilogue(brief)
