"""`checkpoint init --client codex`, judged by the real Codex CLI (npm ``@openai/codex`` 0.171.0).

The project has a stdio mail server (a secret in ``env``, a script named relative to its ``cwd``) and an HTTP
server that wants a bearer token from ``bearer_token_env_var``, in ``.codex/config.toml``; the user's
``~/.codex/config.toml`` trusts the project and has a server of its own. ``codex mcp list --json`` shows what Codex
will start before and after `init`; a second `init` changes nothing; `--undo` puts every file back byte for byte.
Then whole headless sessions (``codex exec``) against a scripted model on loopback (``scripted_responses``): the
e-mail goes out once and is journaled, and the same call in a new session is refused by the policy `init` wrote,
while the SessionStart hook `init` added hands the model the brief naming it (Codex's hook output is Claude Code's
``hookSpecificOutput.additionalContext``, so `checkpoint brief --hook` needs no variant).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.init.wrap import is_session_server, runs_checkpoint
from checkpoint_mcp.journal.records import CallState
from scripted_responses import McpCall, ResponsesModel, serving

import nodetools
from .entries import run_init
from httpservers import HttpServer, faults_server
from support import headless, journal_states

MAILBOX = Path(__file__).resolve().parent.parent / "servers" / "mailbox_server.py"
MAIL = {"to": "bob@example.com", "subject": "Your invoice", "body": "Hi Bob, your invoice is attached."}
SECRET = "s3cret-mail-key"
TOKEN = "billing-token-42"
NO_NETWORK = (
    # Nothing but the loopback model. Measured with strace: by default Codex 0.171.0 looks up github.com (its
    # curated plugins) and chatgpt.com (remote plugins) even with a custom model provider; with plugins off it
    # resolves no name at all. The rest: no update check, no analytics, no feedback upload.
    "-c",
    "features.plugins=false",
    "-c",
    "check_for_update_on_startup=false",
    "-c",
    "analytics.enabled=false",
    "-c",
    "feedback.enabled=false",
)


@dataclass
class Project:
    path: Path
    home: Path
    outbox: Path
    billing: HttpServer
    effects: Path
    hold: Path

    @property
    def config(self) -> Path:
        return self.path / ".codex" / "config.toml"

    @property
    def user_config(self) -> Path:
        return self.home / ".codex" / "config.toml"

    def env(self) -> dict[str, str]:
        """Codex's environment: a temporary HOME (and CODEX_HOME), the billing token, no real credentials."""
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        return {
            **keep,
            "HOME": str(self.home),
            "CODEX_HOME": str(self.home / ".codex"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "BILLING_TOKEN": TOKEN,
            "OPENAI_API_KEY": "dummy",
        }

    def sent(self) -> list[dict[str, str]]:
        lines = self.outbox.read_text().splitlines() if self.outbox.exists() else []
        return [json.loads(line) for line in lines]

    def billed(self) -> list[dict[str, Any]]:
        """The billing server's tools/call requests, each with the Authorization it came with."""
        lines = self.effects.read_text().splitlines() if self.effects.exists() else []
        received = [json.loads(line) for line in lines]
        return [r for r in received if r.get("event") == "received" and r.get("method") == "tools/call"]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    path, home = tmp_path / "project", tmp_path / "home"
    (path / ".codex").mkdir(parents=True)
    (path / "tools").mkdir()
    (home / ".codex").mkdir(parents=True)
    shutil.copy(MAILBOX, path / "tools" / "mailbox_server.py")
    outbox = tmp_path / "mail" / "sent.jsonl"
    hold = tmp_path / "release"
    hold.touch()  # calls answer at once unless a test removes it
    with faults_server(tmp_path, "--require-authorization", f"Bearer {TOKEN}") as billing:
        (path / ".codex" / "config.toml").write_text(
            "# The project's servers (init keeps this comment).\n"
            "[mcp_servers.mailbox]\n"
            f'command = "{sys.executable}"\n'
            'args = ["mailbox_server.py"]  # relative to cwd\n'
            f'cwd = "{path / "tools"}"\n'
            f'env = {{ MAILBOX_DIR = "{outbox.parent}", MAILBOX_KEY = "{SECRET}", MAILBOX_HOLD = "{hold}" }}\n'
            "required = true  # the first turn waits for it (the scripted model calls it there)\n"
            "\n"
            "[mcp_servers.billing]\n"
            f'url = "{billing.url}"\n'
            'bearer_token_env_var = "BILLING_TOKEN"\n'
            "tool_timeout_sec = 30\n"
            "required = true\n"
        )
        (home / ".codex" / "config.toml").write_text(
            f'[projects."{path}"]\ntrust_level = "trusted"\n\n'
            "[mcp_servers.notes]  # a user-scope server: every project\n"
            f'command = "{sys.executable}"\n'
            f'args = ["{MAILBOX}"]\n'
            f'env = {{ MAILBOX_DIR = "{tmp_path / "notes"}" }}\n'
        )
        yield Project(path, home, outbox, billing, tmp_path / "effects.jsonl", hold)


def init(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return run_init("--client", "codex", "--project", str(project.path), *args, env=project.env())


def listed(project: Project) -> dict[str, dict[str, Any]]:
    """``codex mcp list --json`` in the project: every server Codex would start, by name."""
    done = subprocess.run(
        [str(nodetools.codex()), *NO_NETWORK, "mcp", "list", "--json"],
        cwd=project.path,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return {server["name"]: server for server in json.loads(done.stdout)}


def test_codex_lists_the_wrapped_servers_a_second_init_changes_nothing_and_undo_restores_every_byte(
    project: Project,
) -> None:
    before = listed(project)
    assert before["mailbox"]["transport"]["command"] == sys.executable
    assert before["billing"]["transport"]["type"] == "streamable_http"
    originals = {p: p.read_bytes() for p in (project.config, project.user_config)}

    done = init(project)
    assert done.returncode == 0, done.stderr
    after = listed(project)

    mailbox = after["mailbox"]["transport"]
    assert runs_checkpoint(mailbox)
    assert mailbox["args"][mailbox["args"].index("--upstream-cmd") + 1] == f"{sys.executable} mailbox_server.py"
    assert mailbox["cwd"] == str(project.path / "tools")
    assert mailbox["env"]["MAILBOX_KEY"] == SECRET
    assert SECRET not in " ".join(mailbox["args"])
    billing = after["billing"]["transport"]
    assert billing["type"] == "stdio", "the proxy is a stdio server; it reaches the HTTP one"
    assert billing["args"][-4:] == ["--upstream-url", project.billing.url, "--upstream-bearer-env", "BILLING_TOKEN"]
    assert billing["env_vars"] == ["BILLING_TOKEN"], "Codex passes the token's variable only if named"
    assert after["billing"]["tool_timeout_sec"] == 30
    notes = after["notes"]["transport"]
    assert notes["args"][notes["args"].index("--journal") + 1] == str(
        project.home / ".local" / "share" / "checkpoint" / "notes.db"
    ), "a user-scope server gets its own journal"
    session = after["checkpoint-session"]
    assert is_session_server(session["transport"])
    assert session["startup_timeout_sec"] == 30
    assert "required = true  # the first turn waits for it" in project.config.read_text(), "every key kept"
    text = project.config.read_text()
    assert text.startswith("# The project's servers (init keeps this comment).\n")
    assert "[[hooks.SessionStart]]" in text
    assert "brief --hook --project-root" in text
    assert "open /hooks in Codex and trust" in done.stderr, done.stderr
    assert "does not mark" not in done.stderr, "the project is trusted: init does not say it is not"

    written = {p: p.read_bytes() for p in (project.config, project.user_config)}
    again = init(project)
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stderr
    assert {p: p.read_bytes() for p in written} == written

    undone = init(project, "--undo")
    assert undone.returncode == 0, undone.stderr
    assert {p: p.read_bytes() for p in originals} == originals
    assert not (project.path / ".checkpoint" / "policies").exists()


def test_init_says_an_untrusted_project_s_servers_do_not_start_and_never_marks_trust(project: Project) -> None:
    untrusted = project.user_config.read_text().replace('trust_level = "trusted"', 'trust_level = "untrusted"')
    project.user_config.write_text(untrusted)
    done = init(project, "--scope", "project")
    assert done.returncode == 0, done.stderr
    assert "does not mark" in done.stderr, done.stderr
    assert 'trust_level = "untrusted"' in project.user_config.read_text()
    assert "left alone: notes (user scope; not in --scope)" in done.stderr


def test_a_table_init_cannot_carry_over_is_refused_by_name_and_nothing_is_written(project: Project) -> None:
    text = project.config.read_text() + '\n[mcp_servers.helper]\nurl = "http://127.0.0.1:9/mcp"\n'
    project.config.write_text(text + 'http_headers_helper = "get-token"\n')
    done = init(project)
    assert done.returncode == 1
    assert "server 'helper': 'http_headers_helper' cannot be carried over" in done.stderr
    assert project.config.read_text() == text + 'http_headers_helper = "get-token"\n'
    project.config.write_text(text + 'bearer_token = "t"\nbearer_token_env_var = "T"\n')
    twice = init(project)
    assert twice.returncode == 1
    assert "server 'helper': gives the Authorization header more than once" in twice.stderr
    assert init(project, "--scope", "local").returncode == 2


def test_a_server_added_later_is_wrapped_with_its_headers_and_the_trusted_hook_stays_as_it_was(
    project: Project,
) -> None:
    assert init(project).returncode == 0
    hooks = project.config.read_text().split("[[hooks.SessionStart]]")[1]
    later = (
        "\n[mcp_servers.later]\n"
        'url = "http://127.0.0.1:9/mcp"\n'
        'http_headers = { "X-Team" = "blue" }\n'
        'env_http_headers = { "X-Key" = "LATER_KEY" }\n'
    )
    project.config.write_text(project.config.read_text() + later)
    edited = project.config.read_bytes()

    dry = init(project, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+[mcp_servers.later]" not in dry.stdout, "the table stays; its keys change"
    assert '-url = "http://127.0.0.1:9/mcp"' in dry.stdout, dry.stdout
    assert project.config.read_bytes() == edited, "--dry-run writes nothing"

    done = init(project, "--list-timeout", "2")
    assert done.returncode == 0, done.stderr
    assert f"wrapped (project scope, {project.config}; the project's journal): later" in done.stderr, done.stderr
    assert project.config.read_text().split("[[hooks.SessionStart]]")[1].startswith(hooks.split("[mcp_servers")[0])
    transport = listed(project)["later"]["transport"]
    assert transport["args"][-6:] == [
        "--upstream-url",
        "http://127.0.0.1:9/mcp",
        "--upstream-header-env",
        "X-Team=CHECKPOINT_HEADER_X_TEAM",
        "--upstream-header-env",
        "X-Key=LATER_KEY",
    ]
    assert transport["env"] == {"CHECKPOINT_HEADER_X_TEAM": "blue"}
    assert transport["env_vars"] == ["LATER_KEY"]


def codex_exec(url: str, *flags: str) -> list[str]:
    """``codex exec`` against the scripted model at ``url`` (a custom provider speaking the Responses API)."""
    provider = f'model_providers.scripted={{name="scripted", base_url="{url}", wire_api="responses"}}'
    return [
        str(nodetools.codex()),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        *NO_NETWORK,
        *flags,
        "-c",
        provider,
        "-c",
        "model_provider=scripted",
        "-c",
        "model=scripted",
        "Send Bob his invoice and bill him.",
    ]


def session(project: Project, model: ResponsesModel, *flags: str) -> str:
    """One whole headless Codex session (``codex exec``) in the project, driven by ``model``; its JSON events."""
    with serving(model) as url:
        return headless(codex_exec(url, *flags), cwd=project.path, env=project.env(), timeout=60)


def developer_texts(request: dict[str, Any]) -> list[str]:
    """The texts of the developer messages Codex sent the model (where a SessionStart hook's context goes)."""
    messages = [item for item in request.get("input") or [] if item.get("role") == "developer"]
    return [part.get("text", "") for message in messages for part in message.get("content") or []]


def plan() -> ResponsesModel:
    return ResponsesModel([McpCall("mailbox", "send_email", MAIL), McpCall("billing", "send_email", {"to": "bob"})])


@pytest.mark.timeout(120)
def test_a_send_in_a_codex_session_is_journaled_once_and_its_repeat_in_a_new_session_is_refused(
    project: Project,
) -> None:
    done = init(project)
    assert done.returncode == 0, done.stderr
    journal = str(project.path / ".checkpoint" / "journal.db")

    first = plan()
    session(project, first)
    assert len(project.sent()) == 1, project.sent()
    assert journal_states(journal, "mailbox") == {1: CallState.COMPLETED}
    assert journal_states(journal, "billing") == {1: CallState.COMPLETED}
    assert [call["auth"] for call in project.billed()] == [f"Bearer {TOKEN}"], "the token came through env_vars"
    tools = [entry.get("name") for entry in first.requests[0].get("tools", [])]
    assert "mcp__checkpoint_session" in tools, f"Codex waited for the session server (required): {tools}"

    again = plan()
    # The user trusts the hook in Codex's /hooks view; a headless run says so for this invocation only.
    session(project, again, "--dangerously-bypass-hook-trust")
    briefs = [text for text in developer_texts(again.requests[0]) if "## Side effects (journal)" in text]
    assert len(briefs) == 1, "the SessionStart hook's brief reached the model"
    assert "`send_email`" in briefs[0], briefs[0]
    assert "(workflow `mailbox`)" in briefs[0], briefs[0]
    assert len(project.sent()) == 1, project.sent()
    assert len(project.billed()) == 1, project.billed()
    refusals = again.tool_outputs()
    assert len(refusals) == 2, refusals
    assert all("already ran" in text for text in refusals), refusals


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc (whatever process group or session each one is in)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


@pytest.mark.timeout(120)
def test_codex_killed_while_the_e_mail_is_in_flight_then_a_new_session_sends_none_and_is_told(
    project: Project,
) -> None:
    assert init(project).returncode == 0
    project.hold.unlink()  # the mail goes out, then the answer waits
    with serving(ResponsesModel([McpCall("mailbox", "send_email", MAIL)])) as url:
        child = subprocess.Popen(
            codex_exec(url),
            cwd=project.path,
            env=project.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not project.sent() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        # Codex starts each MCP server in a process group of its own: a crash of the machine is every one of
        # them killed at once, Codex, its proxies and the mail server.
        for pid in [child.pid, *descendants(child.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert len(project.sent()) == 1, "the mail went out before the crash"
    project.hold.touch()

    resumed = ResponsesModel([McpCall("mailbox", "send_email", MAIL)])
    session(project, resumed, "--dangerously-bypass-hook-trust")

    assert len(project.sent()) == 1, project.sent()
    briefs = [text for text in developer_texts(resumed.requests[0]) if "## Side effects (journal)" in text]
    assert len(briefs) == 1, "the SessionStart hook's brief reached the model"
    assert "doubt" in briefs[0], briefs[0]
    assert "`send_email`" in briefs[0], briefs[0]
    answer = resumed.tool_outputs()[-1]
    assert "in doubt: call #1 (send_email)" in answer, answer
