"""Secrets stay out of command lines: a wrapped HTTP entry's header reaches the server with the value the client's
variable holds, while the proxy's own command line (readable by every user in ``ps``) holds only references."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .entries import launch_argv, run_init

SECRET = "sk-live-'quoted' \"and\" $spaced"


class _Recorder(BaseHTTPRequestHandler):
    """Answers an MCP ``initialize`` POST with JSON and records the headers of every request."""

    seen: list[dict[str, str]]

    def do_POST(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in body:
            self.send_response(202)
            self.end_headers()
            return
        result = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rec", "version": "1"},
        }
        data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


def first_header_through(entry: dict[str, Any], seen: list[dict[str, str]]) -> tuple[str, bytes]:
    """Start ``entry`` as Claude Code would (``PAY_TOKEN`` set), initialize through it: the Authorization header
    the server received, and the proxy's command line."""
    seen.clear()
    argv, env = launch_argv(entry, {**os.environ, "PAY_TOKEN": SECRET})
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode() + b"\n"
        )
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        if "--name" in entry["args"]:  # init gives the proxy the entry's name (an older init did not)
            assert answer["result"]["serverInfo"]["name"] == "pay"
        command_line = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    finally:
        proc.kill()
        proc.wait(20)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return seen[0]["authorization"], command_line


def test_a_header_secret_reaches_the_server_and_never_the_proxy_command_line(
    tmp_path: Path, recorder: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recorder
    config = {"mcpServers": {"pay": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${PAY_TOKEN}"}}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(config))
    assert run_init("--project", str(tmp_path)).returncode == 0
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["pay"]
    assert "PAY_TOKEN" not in json.dumps(entry["args"])
    assert "${" not in json.dumps(entry["args"]), "nothing left in args for the client to expand"

    authorization, command_line = first_header_through(entry, seen)
    assert authorization == f"Bearer {SECRET}"
    assert SECRET.encode() not in command_line
    assert b"--upstream-header-env\0Authorization=CHECKPOINT_HEADER_AUTHORIZATION\0" in command_line


def test_an_entry_an_older_init_wrote_still_works_and_a_second_init_moves_it_to_upstream_header_env(
    tmp_path: Path, recorder: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recorder
    old_args = ["-m", "checkpoint_mcp", "--journal", str(tmp_path / "j.db"), "--workflow-id", "pay"]
    old_args += ["--upstream-url", url, "--upstream-header", "Authorization: ${CHECKPOINT_HEADER_AUTHORIZATION}"]
    old_args += ["--upstream-header", "X-Mine: ${MY_OWN}"]  # written by hand: left as it is
    old = {
        "command": sys.executable,
        "args": old_args,
        "env": {"CHECKPOINT_HEADER_AUTHORIZATION": "Bearer ${PAY_TOKEN}", "MY_OWN": "x"},
    }
    original = json.dumps({"mcpServers": {"pay": old}}, indent=2)
    (tmp_path / ".mcp.json").write_text(original)
    assert first_header_through(old, seen)[0] == f"Bearer {SECRET}", "the old form keeps working"

    upgraded = run_init("--project", str(tmp_path))
    assert upgraded.returncode == 0, upgraded.stderr
    assert "moved to --upstream-header-env: pay" in upgraded.stderr
    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["pay"]
    assert entry["args"] == [
        *old_args[:-4],
        "--upstream-header-env",
        "Authorization=CHECKPOINT_HEADER_AUTHORIZATION",
        "--upstream-header",
        "X-Mine: ${MY_OWN}",
    ]
    assert entry["env"] == old["env"]
    assert first_header_through(entry, seen)[0] == f"Bearer {SECRET}"

    again = run_init("--project", str(tmp_path))
    assert "nothing to change" in again.stderr, again.stderr
    assert run_init("--undo", "--project", str(tmp_path)).returncode == 0
    assert (tmp_path / ".mcp.json").read_text() == original


def call_through(entry: dict[str, Any], tool: str, arguments: dict[str, Any]) -> tuple[int, Any, str]:
    """Start a stdio ``entry`` as its client does, initialize, call ``tool``: (exit code or 0, answer, stderr)."""
    argv, env = launch_argv(entry, dict(os.environ))
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]
    try:
        out, err = proc.communicate(b"".join(json.dumps(line).encode() + b"\n" for line in lines), timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(20)
    answers = [json.loads(line) for line in out.splitlines() if line.strip()]
    answer = next((a for a in answers if a.get("id") == 2), None)
    return proc.returncode, answer, err.decode(errors="replace")


def test_init_writes_no_database_password_into_a_project_and_the_proxy_still_reaches_the_database(
    tmp_path: Path, temp_home: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL journal URL with a password, given to `init` and written in the user's own Copilot file: no
    file the project commits holds the password (the wrapped servers, the session server, the brief's hook name
    the URL without it), init names the line libpq's password file needs, and the proxy started from the
    project's file reaches the database once that line is there (and not before)."""
    from checkpoint_mcp.journal import without_password
    from pgserver import PASSWORD

    from support import journal_calls, server_cmd

    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    project = tmp_path / "project"
    (project / ".github").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=60)
    server = Path(__file__).parents[1] / "servers" / "effects_server.py"
    mail = {"command": sys.executable, "args": [str(server)], "env": {"EFFECTS_FILE": str(tmp_path / "e.jsonl")}}
    (project / ".github" / "mcp.json").write_text(json.dumps({"mcpServers": {"mail": {"type": "local", **mail}}}))
    notes_args = ["-m", "checkpoint_mcp", "--journal", pg_url, "--workflow-id", "notes"]
    notes = {"type": "local", "command": sys.executable, "args": [*notes_args, "--upstream-cmd", server_cmd("x.py")]}
    user_file = temp_home / ".copilot" / "mcp-config.json"
    user_file.parent.mkdir(parents=True)
    user_file.write_text(json.dumps({"mcpServers": {"notes": notes}}))

    done = run_init("--project", str(project), "--client", "copilot", "--no-policy", "--journal", pg_url)
    assert done.returncode == 0, done.stderr
    subprocess.run(["git", "-C", str(project), "add", "-A"], check=True, timeout=60)
    listing = ["git", "-C", str(project), "ls-files"]
    staged = subprocess.run(listing, capture_output=True, text=True, check=True, timeout=60).stdout
    assert {".github/mcp.json", ".github/hooks/checkpoint-brief.json"} <= set(staged.split())
    found = subprocess.run(
        ["git", "-C", str(project), "grep", "--cached", "-l", "-F", PASSWORD],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (found.returncode, found.stdout) == (1, ""), f"the password is in {found.stdout}"
    written = (project / ".github" / "mcp.json").read_text() + (project / ".github" / "hooks").joinpath(
        "checkpoint-brief.json"
    ).read_text()
    assert (
        without_password(pg_url) in written
    )  # the journal (the user's and the project's) is named, without its password
    assert PASSWORD in user_file.read_text()  # the user's own file keeps what the user wrote
    database = pg_url.rsplit("/", 1)[1]
    port = pg_url.rsplit(":", 1)[1].split("/", maxsplit=1)[0]
    line = f"127.0.0.1:{port}:{database}:checkpoint"
    assert f"'{line}:PASSWORD' to {temp_home / '.pgpass'}" in done.stderr

    entry = json.loads((project / ".github" / "mcp.json").read_text())["mcpServers"]["mail"]
    code, answer, err = call_through(entry, "send_email", {"to": "ann"})
    assert answer is None, "reached the database without a password"
    assert code != 0
    assert "password" in err
    (temp_home / ".pgpass").write_text(f"{line}:{PASSWORD}\n")
    (temp_home / ".pgpass").chmod(0o600)
    code, answer, err = call_through(entry, "send_email", {"to": "ann"})
    assert answer is not None, err
    assert answer["result"]["content"][0]["text"] == "sent to ann"
    assert [(row.seq, row.tool) for row in journal_calls(pg_url, "mail")] == [(1, "send_email")]
    assert PASSWORD not in err
    # Run again: the journals it wrote without the password are the ones it reads back (nothing to change), and
    # the password file now answers for them (nothing to say).
    again = run_init("--project", str(project), "--client", "copilot", "--no-policy", "--journal", pg_url)
    assert again.returncode == 0, again.stderr
    assert "nothing to change" in again.stderr
    assert ".pgpass" not in again.stderr


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("postgresql://u:pw@db.internal:5433/journal", "postgresql://u@db.internal:5433/journal"),
        ("postgres://u:p%40ss%3Aw@db/j?sslmode=require", "postgres://u@db/j?sslmode=require"),
        ("postgresql://u@db/j?password=pw&sslmode=require", "postgresql://u@db/j?sslmode=require"),
        ("postgresql://db/j", "postgresql://db/j"),
        ("postgresql://:pw@db/j", "postgresql://db/j"),
        ("/home/me/.checkpoint/journal.db", "/home/me/.checkpoint/journal.db"),
    ],
)
def test_a_journal_is_written_into_a_client_file_without_its_password(given: str, written: str) -> None:
    from checkpoint_mcp.init.wrap import journal_args

    assert journal_args(given, "mail") == ["--journal", written, "--workflow-id", "mail"]
