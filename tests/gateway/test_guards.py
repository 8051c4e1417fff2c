"""The gateway's guards, through a real `checkpoint serve` process: tokens, origins, hosts, body size, binding."""

from __future__ import annotations

import http.client
import os
import select
import socket
import subprocess
from pathlib import Path

import pytest

from gatewayproc import effects_gateway, initialize, request

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd

TOKEN = "s3cret-token-never-logged"
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
CHUNK_PAUSE = 0.5  # seconds a chunked upload waits for an early answer before its next chunk


def test_without_the_token_every_request_but_the_health_check_is_refused_with_401(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--auth-token-env", "GW_TOKEN", env={"GW_TOKEN": TOKEN}) as gateway:
        for method, path in [("POST", "/mcp"), ("GET", "/metrics"), ("GET", "/w/x/mcp"), ("GET", "/ui/")]:
            reply = request(gateway.port, method, path, PING if method == "POST" else None)
            assert reply.status == 401, (method, path)
            assert reply.headers["www-authenticate"].startswith("Bearer")
        # A probe holds no token: /healthz answers it, with the status alone (what failed is the operator's).
        health = request(gateway.port, "GET", "/healthz")
        assert health.status == 200
        assert health.json() == {"status": "ok"}
        assert request(gateway.port, "GET", "/healthz", headers={"Authorization": f"Bearer {TOKEN}"}).status == 200
        session = initialize(gateway.port, headers={"Authorization": f"Bearer {TOKEN}"})
        assert session


def test_a_wrong_token_is_refused_and_no_token_reaches_the_log(tmp_path: Path) -> None:
    with effects_gateway(
        tmp_path, "--auth-token-env", "GW_TOKEN", "--log-level", "debug", env={"GW_TOKEN": TOKEN}
    ) as gateway:
        wrong = request(gateway.port, "POST", "/mcp", PING, {"Authorization": "Bearer not-the-token"})
        assert wrong.status == 401
        assert b"not-the-token" not in wrong.body
        almost = request(gateway.port, "POST", "/mcp", PING, {"Authorization": f"Bearer {TOKEN}x"})
        assert almost.status == 401
        initialize(gateway.port, headers={"Authorization": f"Bearer {TOKEN}"})
        gateway.terminate()
        assert "refused a request with a wrong token" in gateway.stderr
        assert TOKEN not in gateway.stderr
        assert "not-the-token" not in gateway.stderr


def test_a_foreign_origin_is_refused_with_403_and_a_loopback_one_is_served(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        evil = request(gateway.port, "POST", "/mcp", PING, {"Origin": "http://evil.example"})
        assert evil.status == 403
        assert evil.json()["error"]["message"].startswith("Forbidden")
        assert "id" in evil.json()
        assert evil.json()["id"] is None
        initialize(gateway.port, headers={"Origin": f"http://localhost:{gateway.port}"})
        initialize(gateway.port, headers={"Origin": f"http://127.0.0.1:{gateway.port}"})


def test_an_allowed_origin_is_served(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--allowed-origin", "https://app.example.com") as gateway:
        initialize(gateway.port, headers={"Origin": "https://app.example.com"})
        assert request(gateway.port, "POST", "/mcp", PING, {"Origin": "https://other.example.com"}).status == 403


def test_a_rebound_host_name_is_refused_on_a_loopback_listener(tmp_path: Path) -> None:
    with effects_gateway(tmp_path) as gateway:
        # A page of evil.example whose DNS name now points at 127.0.0.1 sends its own Host.
        rebound = request(gateway.port, "POST", "/mcp", PING, {"Host": f"evil.example:{gateway.port}"})
        assert rebound.status == 403
        initialize(gateway.port, headers={"Host": f"localhost:{gateway.port}"})


def test_a_body_over_the_limit_gets_413_whether_its_length_is_declared_or_not(tmp_path: Path) -> None:
    with effects_gateway(tmp_path, "--max-body", "1000") as gateway:
        big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 5000 + b'"}}'
        declared = request(gateway.port, "POST", "/mcp", big)
        assert declared.status == 413
        assert "--max-body" in declared.json()["error"]["message"]
        assert chunked_status(gateway.port, [big[i : i + 500] for i in range(0, len(big), 500)]) == 413
        initialize(gateway.port)  # a small body still passes


def chunked_status(port: int, chunks: list[bytes]) -> int:
    """POST ``chunks`` as a chunked body, the way a careful HTTP/1.1 client does (RFC 9112, 9.5): one chunk at a
    time, and no more once the server has answered (its 413 comes with ``Connection: close`` as soon as the limit
    is passed; a client that kept writing would meet a closed connection). The status the server answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEFAULT_TIMEOUT) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for chunk in [*chunks, b""]:
            if select.select([sock], [], [], CHUNK_PAUSE)[0]:
                break  # the server answered before the body ended
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                break  # it answered and closed while this chunk was on its way: its answer is read below
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        checkpoint_argv("serve", "--upstream-cmd", server_cmd("effects_server.py"), *args),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )


def test_a_non_loopback_address_without_auth_is_refused_before_listening() -> None:
    done = run_serve("--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "not a loopback address" in done.stderr
    assert "--auth-token-env" in done.stderr
    assert "listening on" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--auth-token-env", "CHECKPOINT_TEST_UNSET_VARIABLE"], "is empty or not set"),
        (["--auth-token-env", "PATH", "--no-auth"], "contradict"),
        (["--listen", "localhost"], "HOST:PORT"),
        (["--upstream-url", "http://127.0.0.1:1/mcp"], "not both"),
        (["--upstream-header", "X-Key: 1"], "applies to --upstream-url only"),
        (["--upstream-header-env", "X-Key=VAR"], "applies to --upstream-url only"),
    ],
)
def test_unusable_flags_are_usage_errors(args: list[str], message: str) -> None:
    done = run_serve(*args)
    assert done.returncode == 2
    assert message in done.stderr


def test_an_unset_upstream_header_env_variable_is_refused_before_listening() -> None:
    done = subprocess.run(
        checkpoint_argv(
            "serve", "--upstream-url", "http://127.0.0.1:9/mcp", "--upstream-header-env", "X-Key=CHECKPOINT_TEST_UNSET"
        ),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "CHECKPOINT_TEST_UNSET"},
    )
    assert done.returncode == 1
    assert "--upstream-header-env X-Key=CHECKPOINT_TEST_UNSET: the environment variable" in done.stderr
    assert "listening on" not in done.stderr


def test_no_auth_on_a_non_loopback_address_is_an_explicit_choice(tmp_path: Path) -> None:
    from gatewayproc import GatewayProcess

    with GatewayProcess("--upstream-cmd", server_cmd("effects_server.py"), "--no-auth", listen="0.0.0.0:0") as gateway:
        assert request(gateway.port, "GET", "/healthz").status == 200


def test_tls_serves_https_with_the_given_certificate(tmp_path: Path) -> None:
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    names = ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert), *names],
        check=True,
        capture_output=True,
        timeout=DEFAULT_TIMEOUT,
    )
    with effects_gateway(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key)) as gateway:
        assert gateway.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(cert))
        connection = http.client.HTTPSConnection("127.0.0.1", gateway.port, timeout=DEFAULT_TIMEOUT, context=context)
        connection.request("GET", "/healthz")
        assert connection.getresponse().status == 200
        connection.close()
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            request(gateway.port, "GET", "/healthz")  # plain HTTP is not served
