"""Tokens from an identity provider, through a real `checkpoint serve`: real RSA and EC keys, a key set served over
loopback HTTP or read from a file, tokens signed by PyJWT. Every bad token is refused with 401 and the pointer to
the protected-resource metadata, and nothing runs; a good one runs; no token reaches a log or an upstream."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import jwt
import pytest

from gatewayproc import MODERN, effects_gateway, initialize, modern_call, request
from idp import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    Key,
    bearer,
    hmac_with_public_key,
    jwks_file,
    token_flags,
    unsigned_token,
)

from httpservers import faults_server
from support import DEFAULT_TIMEOUT, checkpoint_argv, done_count, read_effects, wait_until

WORKFLOW_PATH = "/w/run-1/mcp"


def send(port: int, token: str | None, to: str, seq: int = 1) -> tuple[int, dict[str, str], bytes]:
    headers = {**MODERN, **(bearer(token) if token is not None else {})}
    reply = request(
        port, "POST", WORKFLOW_PATH, modern_call(seq, "send_email", {"to": to}, checkpoint_seq=seq), headers
    )
    return reply.status, reply.headers, reply.body


def test_every_bad_token_is_refused_with_401_and_the_metadata_pointer_and_a_good_one_runs(tmp_path: Path) -> None:
    rsa_key, stranger = Key("rsa-1", "RS256"), Key("rogue", "RS256")
    effects = tmp_path / "effects.jsonl"
    now = int(time.time())
    bad = {
        "expired": rsa_key.token(exp=now - 3600, iat=now - 7200),
        "not yet valid": rsa_key.token(nbf=now + 3600),
        "for another audience": rsa_key.token(aud="https://other.example.test/"),
        "from another issuer": rsa_key.token(iss="https://evil.example.test"),
        "signed by an unknown key": stranger.token(),
        "signed by an unknown key under a known kid": Key("rsa-1", "RS256").token(),
        "alg none": unsigned_token(),
        "HMAC with the public key": hmac_with_public_key(rsa_key),
        "without an expiry": rsa_key.token(exp=None),
        "not a JWT": "opaque-token-1234",
    }
    journal = ["--journal", str(tmp_path / "j.db")]
    with (
        JwksServer(rsa_key) as jwks,
        effects_gateway(tmp_path, *token_flags(jwks.url), *journal, "--log-level", "debug") as gw,
    ):
        metadata_url = f"http://127.0.0.1:{gw.port}/.well-known/oauth-protected-resource"
        status, headers, _ = send(gw.port, None, "nobody")
        assert status == 401
        assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}"'.replace(
            f"http://127.0.0.1:{gw.port}", "https://gateway.example.test"
        )  # the audience is the gateway's URL, so the pointer is there
        for what, token in bad.items():
            status, headers, body = send(gw.port, token, f"victim of {what}")
            assert status == 401, (what, body)
            challenge = headers["www-authenticate"]
            assert challenge.startswith('Bearer resource_metadata="https://gateway.example.test/.well-known/'), what
            assert 'error="invalid_token"' in challenge, what
            assert token not in body.decode(), what
        assert done_count(effects) == 0  # nothing ran
        status, _, body = send(gw.port, rsa_key.token(), "alice's friend")
        assert status == 200, body
        answer = json.loads(body)
        assert answer["result"]["content"][0]["text"] == "sent to alice's friend"
        assert answer["result"]["_meta"]["checkpoint/journal"]["workflow"] == "alice/run-1"  # the principal's own
        # The metadata document is public (a client reads it before it has a token).
        document = request(gw.port, "GET", "/.well-known/oauth-protected-resource")
        assert document.status == 200
        assert document.json() == {
            "resource": AUDIENCE,
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": ["RS256", "ES256"],
        }
        assert request(gw.port, "GET", "/.well-known/oauth-protected-resource/mcp").json()["resource"] == AUDIENCE
        # Health answers a probe without a token, with the status alone; metrics need one.
        assert request(gw.port, "GET", "/healthz").json() == {"status": "ok"}
        assert request(gw.port, "GET", "/healthz", headers=bearer(rsa_key.token())).status == 200
        assert request(gw.port, "GET", "/metrics").status == 401
        gw.terminate()
        log = gw.stderr
    assert done_count(effects) == 1
    assert "the token has expired" in log
    assert "the token is for another audience" in log
    assert "'none' is not accepted" in log
    for token in [*bad.values(), rsa_key.token()]:
        assert token not in log
        assert all(part not in log for part in token.split(".") if len(part) >= 16)  # nor a piece of one


def test_a_rotated_key_is_fetched_when_a_token_names_it_and_es256_keys_work_from_a_file(tmp_path: Path) -> None:
    old, new = Key("2026-a", "RS256"), Key("2026-b", "ES256")
    with JwksServer(old) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url)) as gw:
        assert send(gw.port, old.token(), "one")[0] == 200
        fetched = jwks.fetches
        jwks.keys.append(new)  # the provider rotates: tokens signed by the new key arrive before the set is re-read
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while send(gw.port, new.token(), "two", seq=2)[0] != 200:  # refreshed at most every few seconds
            assert time.monotonic() < deadline, "the new key was never fetched"
            time.sleep(0.5)
        assert jwks.fetches > fetched
        assert jwks.fetches < fetched + 10  # unknown key ids do not make it fetch the set on every request
    ec_key, other_ec = Key("ec-1", "ES256"), Key("ec-2", "ES256")
    keys = jwks_file(tmp_path / "jwks.json", ec_key)
    (tmp_path / "effects.jsonl").unlink()
    with effects_gateway(tmp_path, *token_flags(str(keys), file=True)) as gw:
        assert send(gw.port, ec_key.token(), "three")[0] == 200
        status, headers, _ = send(gw.port, other_ec.token(kid="ec-1"), "four", seq=2)  # right kid, wrong key
        assert status == 401
        assert 'error="invalid_token"' in headers["www-authenticate"]
        # The session era too: initialize with a token, and the session's next request needs one as well.
        session = initialize(gw.port, headers=bearer(ec_key.token()))
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        assert request(gw.port, "POST", "/mcp", ping, {"Mcp-Session-Id": session}).status == 401
        with_token = {"Mcp-Session-Id": session, **bearer(ec_key.token())}
        assert request(gw.port, "POST", "/mcp", ping, with_token).status == 200
    assert done_count(tmp_path / "effects.jsonl") == 1


def test_a_token_that_passed_is_refused_once_it_expires_or_its_key_leaves_the_provider(tmp_path: Path) -> None:
    """A token that passed is remembered (it is not checked again on each request), but never past its expiry
    and never once the key that verified it is gone from the provider's key set."""
    old, new = Key("2026-a", "RS256"), Key("2026-b", "RS256")
    kept = old.token()
    with JwksServer(old) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url)) as gw:
        now = int(time.time())  # once the gateway listens (its start may take seconds on a loaded machine)
        expiring = old.token(exp=now - 27, iat=now - 600)  # expired, but within the 30 s leeway for 2-3 s more
        assert send(gw.port, expiring, "one")[0] == 200
        assert send(gw.port, kept, "two", seq=2)[0] == 200
        assert send(gw.port, kept, "three", seq=3)[0] == 200
        time.sleep(max(0.0, now - 27 + 30 + 0.5 - time.time()))
        status, headers, _ = send(gw.port, expiring, "four", seq=4)
        assert status == 401
        assert "expired" in headers["www-authenticate"]
        jwks.keys = [new]  # the provider retires the old key; a token of the new one makes the gateway fetch the set
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while send(gw.port, new.token(), "five", seq=5)[0] != 200:  # refreshed at most every few seconds
            assert time.monotonic() < deadline, "the new key was never fetched"
            time.sleep(0.5)
        status, headers, _ = send(gw.port, kept, "six", seq=6)
        assert status == 401, "a remembered token outlived its key"
        assert "does not hold" in headers["www-authenticate"]
    assert done_count(tmp_path / "effects.jsonl") == 4


def test_a_token_is_verified_once_while_it_is_remembered_and_the_memory_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from checkpoint_mcp.gateway.tokens import TokenVerifier, VerifiedTokens, token_settings

    key = Key("k", "ES256")
    settings = token_settings(
        issuer=ISSUER, audiences=(AUDIENCE,), jwks_url=None, jwks_file=str(jwks_file(tmp_path / "k.json", key))
    )
    assert settings is not None
    verifier = TokenVerifier(settings)
    verifier.keys.load_file()
    verifier.verified = VerifiedTokens(size=2)
    decoded: list[str] = []
    real_decode = jwt.decode
    monkeypatch.setattr(jwt, "decode", lambda token, *a, **k: decoded.append(token) or real_decode(token, *a, **k))
    first, second, third = key.token("ann"), key.token("bob"), key.token("cy")

    async def run() -> list[str]:
        seen = [(await verifier.verify(token)).principal for token in (first, first, second, first, third, first)]
        seen.append((await verifier.verify(second)).principal)  # forgotten: the one used longest ago when cy came
        return seen

    assert asyncio.run(run()) == ["ann", "ann", "bob", "ann", "cy", "ann", "bob"]
    assert decoded == [first, second, third, second]
    assert len(verifier.verified) == 2


def test_the_token_is_never_sent_to_a_remote_upstream(tmp_path: Path) -> None:
    key = Key("k", "RS256")
    with JwksServer(key) as jwks, faults_server(tmp_path) as upstream:
        from gatewayproc import GatewayProcess

        with GatewayProcess("--upstream-url", upstream.url, *token_flags(jwks.url)) as gw:
            token = key.token()
            session = initialize(gw.port, headers=bearer(token))
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "x"}},
            }
            reply = request(gw.port, "POST", "/mcp", call, {"Mcp-Session-Id": session, **bearer(token)})
            assert reply.status == 200
            assert reply.message()["result"]["content"][0]["text"] == "sent to x"
    received = [e for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "received"]
    assert received
    assert all(e.get("auth") is None for e in received), received
    assert token not in (tmp_path / "effects.jsonl").read_text()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--issuer", ISSUER, "--jwks-url", "http://127.0.0.1:1/j"], "need both --issuer and --audience"),
        (["--issuer", ISSUER, "--audience", AUDIENCE], "exactly one of --jwks-url and --jwks-file"),
        (["--issuer", ISSUER, "--audience", AUDIENCE, "--jwks-url", "ftp://x"], "is not an http(s) URL"),
        (["--operator-scope", "ops"], "need --issuer"),
        ([*token_flags("http://127.0.0.1:1/j"), "--auth-token-env", "T"], "contradict each other"),
        ([*token_flags("http://127.0.0.1:1/j"), "--operator-claim", "roles"], "NAME=VALUE"),
    ],
)
def test_token_flags_that_cannot_work_are_refused_before_listening(flags: list[str], message: str) -> None:
    done = subprocess.run(
        checkpoint_argv("serve", "--upstream-cmd", "true", *flags),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        env={"T": "x", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_a_key_file_that_cannot_be_read_stops_the_gateway_before_it_listens(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text('{"keys": []}', encoding="utf-8")
    done = subprocess.run(
        checkpoint_argv("serve", "--upstream-cmd", "true", *token_flags(str(tmp_path / "keys.json"), file=True)),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert "holds no RS256 or ES256 signing key" in done.stderr


def test_the_operator_scope_is_never_advertised_and_an_operator_who_asks_for_it_reads_metrics(tmp_path: Path) -> None:
    """MCP clients ask for every scope the resource's metadata lists when a 401 names none: the operator's scope
    is listed nowhere (metadata, 401, 403), so no agent is led to ask for it; an operator's token, whose holder
    asked the provider for the scope by name, still reads /metrics."""
    key = Key("k1", "RS256")
    operator_scope = ("--operator-scope", "checkpoint:operator")
    with JwksServer(key) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url, extra=operator_scope)) as gw:
        document = request(gw.port, "GET", "/.well-known/oauth-protected-resource")
        assert document.status == 200
        assert "scopes_supported" not in document.json()
        assert b"checkpoint:operator" not in document.body
        status, headers, _ = send(gw.port, None, "nobody")
        assert status == 401
        assert "scope" not in headers["www-authenticate"]
        agent = request(gw.port, "GET", "/metrics", headers=bearer(key.token("alice", scope="openid")))
        assert agent.status == 403
        assert "insufficient_scope" in agent.headers["www-authenticate"]
        assert "checkpoint:operator" not in agent.headers["www-authenticate"]
        operator = key.token("ops-person", scope="openid checkpoint:operator")
        assert request(gw.port, "GET", "/metrics", headers=bearer(operator)).status == 200


PROMPT = 5.0
"""Seconds a request may take while the provider hangs: generous on a loaded machine, and half of the 10 s a
request waited for the key set's fetch when it blocked on it."""


def test_a_provider_that_hangs_never_delays_a_request_whose_key_is_known(tmp_path: Path) -> None:
    """The key set lives as long as the provider's max-age says (1 s here; 2 s at least); past that, a request
    starts a fetch in the background and is checked with the keys held, so a provider that hangs delays nobody
    whose key is known. The fetch that hung lands when the provider answers: a key it brings then works."""
    key, rotated = Key("k1", "RS256"), Key("k2", "ES256")
    with JwksServer(key, max_age=1) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url)) as gw:
        assert send(gw.port, key.token(), "first")[0] == 200
        fetched = jwks.fetches
        jwks.hang()
        seq = 1

        def timed() -> float:
            nonlocal seq
            seq += 1
            started = time.monotonic()
            assert send(gw.port, key.token(jti=str(seq)), f"call {seq}", seq=seq)[0] == 200
            return time.monotonic() - started

        took: list[float] = []
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while jwks.fetches == fetched:  # past its max-age, a request starts the fetch that hangs
            assert time.monotonic() < deadline, "the key set was never fetched again once past its max-age"
            took.append(timed())
            time.sleep(0.2)
        took += [timed() for _ in range(3)]  # while it hangs
        assert max(took) < PROMPT, took
        jwks.keys.append(rotated)
        jwks.release()
        wait_until(lambda: send(gw.port, rotated.token(), "rotated", seq=99)[0] == 200, what="the rotated key")


def test_a_stale_key_set_serves_while_one_fetch_runs_and_unknown_key_ids_wait_for_that_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key set against a real provider over loopback, with its lifetimes shortened: past its lifetime, the held
    keys answer at once however long the provider hangs; a token naming a key id the set lacks waits for the one
    fetch under way (never a fetch of its own); made-up key ids cannot make the set fetched more than every
    ``REFRESH_AT_MOST_EVERY``."""
    from checkpoint_mcp.errors import InvalidToken
    from checkpoint_mcp.gateway import tokens

    monkeypatch.setattr(tokens, "KEYS_TTL", 0.3)
    monkeypatch.setattr(tokens, "REFRESH_AT_MOST_EVERY", 0.3)
    monkeypatch.setattr(tokens, "FETCH_TIMEOUT", 4.0)
    key, rotated = Key("k1", "RS256"), Key("k2", "RS256")

    async def run(jwks: JwksServer) -> None:
        keys = tokens.KeySet(jwks.url, None)
        await keys.start()
        await asyncio.sleep(0.4)  # the set is past its lifetime now
        jwks.hang()
        loop = asyncio.get_running_loop()
        started = loop.time()
        held = await asyncio.gather(*(keys.key("k1", "RS256") for _ in range(5)))
        assert loop.time() - started < 1.0  # not the 4 s of the fetch that hangs
        assert all(found.key_id == "k1" for found in held)
        async with asyncio.timeout(DEFAULT_TIMEOUT):
            while jwks.fetches < 2:  # the one background fetch reaches the provider, and hangs there
                await asyncio.sleep(0.02)
        waiting = [asyncio.ensure_future(keys.key("k2", "RS256")) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert not any(each.done() for each in waiting)
        jwks.keys.append(rotated)
        jwks.release()
        assert {(await each).key_id for each in waiting} == {"k2"}
        assert jwks.fetches == 2  # they all waited for the fetch under way
        fetched = jwks.fetches
        for n in range(20):
            with pytest.raises(InvalidToken):
                await keys.key(f"made-up-{n}", "RS256")
        assert jwks.fetches <= fetched + 1
        await keys.close()

    with JwksServer(key) as jwks:
        asyncio.run(run(jwks))
