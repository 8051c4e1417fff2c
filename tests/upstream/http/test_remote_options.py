"""The flags of a remote upstream: exactly one way out, TLS verified (a private CA with --upstream-ca), and
clear errors for what cannot work."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import trustme

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import UPSTREAM_REFUSED

from httpservers import faults_server
from support import ProxyProcess, checkpoint_argv, journal_states


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        checkpoint_argv(*args),
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def test_exactly_one_of_upstream_cmd_and_upstream_url_is_required() -> None:
    neither = run("--journal", "j.db")
    assert neither.returncode == 2
    assert "--upstream-cmd or --upstream-url is required" in neither.stderr
    both = run("--upstream-cmd", "true", "--upstream-url", "http://127.0.0.1:9/mcp")
    assert both.returncode == 2
    assert "either --upstream-cmd or --upstream-url, not both" in both.stderr
    header_without_url = run("--upstream-cmd", "true", "--upstream-header", "X-A: b")
    assert header_without_url.returncode == 2
    assert "--upstream-header applies to --upstream-url only" in header_without_url.stderr
    header_env_without_url = run("--upstream-cmd", "true", "--upstream-header-env", "X-A=B")
    assert header_env_without_url.returncode == 2
    assert "--upstream-header-env applies to --upstream-url only" in header_env_without_url.stderr


def test_a_url_that_is_not_http_is_refused_before_anything_starts() -> None:
    refused = run("--upstream-url", "ftp://example.com/mcp")
    assert refused.returncode == 1
    assert "must be an http:// or https:// URL" in refused.stderr


def test_a_malformed_header_is_refused_without_echoing_its_value() -> None:
    refused = run("--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header", "no colon secret-ish")
    assert refused.returncode == 1
    assert "must look like 'Name: value'" in refused.stderr


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    ca = trustme.CA()
    served = ca.issue_cert("127.0.0.1")
    chain = tmp_path / "server.pem"
    served.private_key_and_cert_chain_pem.write_to_path(str(chain))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return chain, ca_file


def test_https_with_a_private_ca_needs_upstream_ca_and_certificates_are_verified(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    chain, ca_file = _certificate(tmp_path)
    with faults_server(tmp_path, "--cert", str(chain), scheme="https") as server:
        with ProxyProcess("--upstream-url", server.url, "--journal", journal) as untrusted:
            refused = untrusted.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
            assert refused["error"]["code"] == UPSTREAM_REFUSED
            assert "CERTIFICATE_VERIFY_FAILED" in refused["error"]["message"]
            assert untrusted.close() == 0
        with ProxyProcess("--upstream-url", server.url, "--journal", journal, "--upstream-ca", str(ca_file)) as trusted:
            trusted.initialize()
            reply = trusted.call("send_email", {"to": "ivy"}, seq=1)
            assert trusted.close() == 0
    assert reply["result"]["content"][0]["text"] == "sent to ivy"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}


# A value a client would have expanded (or warned about) on a command line: the proxy takes it as it is.
TOKEN = "Bearer s3cret ${NOT_A_REFERENCE} 'quoted'"


def test_upstream_header_env_sends_the_variable_s_value_to_a_server_that_requires_it(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with faults_server(tmp_path, "--require-authorization", TOKEN) as server:
        flags = ("--upstream-url", server.url, "--journal", journal, "--upstream-header-env", "Authorization=PAY_KEY")
        with ProxyProcess(*flags, env={"PAY_KEY": TOKEN}) as proxy:
            proxy.initialize()
            reply = proxy.call("send_email", {"to": "ivy"}, seq=1)
            command_line = Path(f"/proc/{proxy.proc.pid}/cmdline").read_bytes()
            assert proxy.close() == 0
        with ProxyProcess(*flags[:4], env={"PAY_KEY": TOKEN}) as without:
            refused = without.request(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
            assert without.close() == 0
    assert reply["result"]["content"][0]["text"] == "sent to ivy"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert TOKEN.encode() not in command_line
    assert "401" in refused["error"]["message"], "the server does refuse a request without the header"
    received = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    sent = [r["auth"] for r in received if r["event"] == "received"]
    assert len(sent) >= 3, "initialize, its notification and the call"
    assert set(sent) == {TOKEN}


def test_upstream_header_env_with_an_unset_or_empty_variable_stops_at_start_naming_both() -> None:
    flags = ("--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header-env", "Authorization=PAY_KEY")
    env = {k: v for k, v in os.environ.items() if k != "PAY_KEY"}
    unset = subprocess.run(
        checkpoint_argv(*flags),
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    empty = run(*flags, env={"PAY_KEY": ""})
    for refused in (unset, empty):
        assert refused.returncode == 1
        assert "--upstream-header-env Authorization=PAY_KEY: the environment variable PAY_KEY is empty or unset" in (
            refused.stderr
        )
    malformed = run("--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header-env", "Authorization: PAY_KEY")
    assert malformed.returncode == 1
    assert "must look like 'Name=VARIABLE'" in malformed.stderr
    twice = run(*flags, "--upstream-header", "authorization: x", env={"PAY_KEY": "k"})
    assert twice.returncode == 1
    assert "given by both --upstream-header and --upstream-header-env" in twice.stderr


def test_upstream_bearer_env_sends_bearer_and_the_variable_s_value_to_a_server_that_requires_it(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    token = "s3cret-token"
    with faults_server(tmp_path, "--require-authorization", f"Bearer {token}") as server:
        flags = ("--upstream-url", server.url, "--journal", journal, "--upstream-bearer-env", "CODEX_TOKEN")
        with ProxyProcess(*flags, env={"CODEX_TOKEN": token}) as proxy:
            proxy.initialize()
            reply = proxy.call("send_email", {"to": "ivy"}, seq=1)
            command_line = Path(f"/proc/{proxy.proc.pid}/cmdline").read_bytes()
            assert proxy.close() == 0
    assert reply["result"]["content"][0]["text"] == "sent to ivy"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}
    assert token.encode() not in command_line
    received = [json.loads(line) for line in (tmp_path / "effects.jsonl").read_text().splitlines()]
    assert {r["auth"] for r in received if r["event"] == "received"} == {f"Bearer {token}"}


def test_upstream_bearer_env_unset_or_beside_an_authorization_header_stops_at_start() -> None:
    url = ("--upstream-url", "http://127.0.0.1:9/mcp")
    empty = run(*url, "--upstream-bearer-env", "CODEX_TOKEN", env={"CODEX_TOKEN": ""})
    assert empty.returncode == 1
    assert "--upstream-bearer-env CODEX_TOKEN: the environment variable is empty or unset" in empty.stderr
    both = run(
        *url, "--upstream-bearer-env", "CODEX_TOKEN", "--upstream-header", "Authorization: x", env={"CODEX_TOKEN": "t"}
    )
    assert both.returncode == 1
    assert "given by both --upstream-bearer-env" in both.stderr
    stdio = run("--upstream-cmd", "true", "--upstream-bearer-env", "CODEX_TOKEN")
    assert stdio.returncode == 2
    assert "--upstream-bearer-env applies to --upstream-url only" in stdio.stderr
