"""deploy/compose.yaml: valid for the compose specification once its variables are set (compose-spec, which does
not substitute them: ``interpolated`` does, as compose does before it validates), its secrets only ``${VAR:?…}``
references; its gateway service run by podman; its HAProxy keeping a session on the replica that opened it."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import compose_spec
import pytest
import yaml

from containers import ROOT, Container, free_port, tool
from gatewayproc import GatewayProcess, request
from pgserver import PASSWORD

from support import DEFAULT_TIMEOUT, server_cmd

DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
VARIABLES = {
    "POSTGRES_PASSWORD": "journal-password-in-the-environment",
    "CHECKPOINT_TOKEN": "gateway-token-in-the-environment",
    "CHECKPOINT_UPSTREAM_URL": "https://mcp.example.com/mcp",
}
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|KEY")
PING = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


class MissingVariable(ValueError):
    """A ``${VAR:?message}`` whose variable is unset or empty: compose refuses to start."""


def interpolated(value: Any, variables: dict[str, str]) -> Any:
    """``value`` (parsed YAML) with every ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?err}`` and
    ``${VAR?err}`` replaced as compose does; a whole-value reference that yields digits becomes a number.

    Raises:
        MissingVariable: a required variable is unset (or empty, for ``:?``).
    """
    if isinstance(value, dict):
        return {key: interpolated(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolated(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        given = variables.get(name)
        empty = given is None or (given == "" and operator in (":?", ":-"))
        if operator in (":?", "?") and empty:
            raise MissingVariable(f"required variable {name} is missing a value: {argument}")
        if operator in (":-", "-") and empty:
            return argument
        return given or ""

    text = REFERENCE.sub(one, value.replace("$$", "\0"))
    text = text.replace("\0", "$")
    return int(text) if REFERENCE.fullmatch(value) and text.isdigit() else text


def raw() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def validated(variables: dict[str, str]) -> compose_spec.PyCompose:
    """The compose file, interpolated with ``variables`` and parsed against the compose specification."""
    project = compose_spec.PyCompose.from_json(json.dumps(interpolated(raw(), variables)))
    project.to_spec()  # every field checked against the specification's model
    return project


def test_the_compose_file_is_valid_and_runs_two_healthy_hardened_replicas_on_postgresql_behind_haproxy() -> None:
    project = validated(VARIABLES)
    services = project.services
    assert services is not None
    assert set(services) == {"postgres", "checkpoint", "haproxy"}
    gateway, postgres, haproxy = services["checkpoint"], services["postgres"], services["haproxy"]
    assert gateway.deploy is not None
    assert gateway.deploy.replicas == 2
    assert validated({**VARIABLES, "CHECKPOINT_REPLICAS": "3"}).services["checkpoint"].deploy.replicas == 3
    for name, service in services.items():
        assert service.read_only is True, name
        assert service.cap_drop == {"ALL"}, name
    # Health: PostgreSQL's own check, the image's HEALTHCHECK script for every replica; each waits for the one below.
    assert postgres.healthcheck is not None
    assert postgres.healthcheck.test[1] == "pg_isready"
    assert gateway.healthcheck is not None
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"CMD {json.dumps(gateway.healthcheck.test[1:])}" in dockerfile
    document = interpolated(raw(), VARIABLES)
    assert document["services"]["checkpoint"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert document["services"]["haproxy"]["depends_on"]["checkpoint"]["condition"] == "service_healthy"
    # The journal's data in a named volume; the gateway built from this repository; HAProxy's file beside compose's.
    assert "journal:/var/lib/postgresql/data" in document["services"]["postgres"]["volumes"]
    assert "journal" in document["volumes"]
    assert (COMPOSE.parent / document["services"]["checkpoint"]["build"]["context"] / "Dockerfile").is_file()
    config = document["services"]["haproxy"]["volumes"][0].split(":")[0]
    assert (COMPOSE.parent / config).is_file()
    assert haproxy.ports is not None


def test_every_secret_is_a_required_variable_reference_and_compose_refuses_without_it() -> None:
    document = raw()
    secrets = {
        (service, name): value
        for service, settings in document["services"].items()
        for name, value in (settings.get("environment") or {}).items()
        if SECRET_NAME.search(name)
    }
    assert set(secrets) == {
        ("postgres", "POSTGRES_PASSWORD"),
        ("checkpoint", "PGPASSWORD"),
        ("checkpoint", "CHECKPOINT_TOKEN"),
    }
    for (service, name), value in secrets.items():
        match = REFERENCE.fullmatch(value)
        assert match is not None, (service, name, value)
        assert match.group(2) == ":?", (service, name, value)
        assert match.group(3), (service, name, value)  # with the message compose shows when it is unset
    journal_url = document["services"]["checkpoint"]["environment"]["CHECKPOINT_SERVE_JOURNAL"]
    assert "${" not in journal_url
    assert ":" not in journal_url.split("@")[0].split("//")[1]  # a user, no password
    for name in ("POSTGRES_PASSWORD", "CHECKPOINT_TOKEN", "CHECKPOINT_UPSTREAM_URL"):
        with pytest.raises(MissingVariable, match=name):
            validated({key: value for key, value in VARIABLES.items() if key != name})
    with pytest.raises(MissingVariable, match="CHECKPOINT_TOKEN"):
        validated({**VARIABLES, "CHECKPOINT_TOKEN": ""})


def test_the_gateway_service_runs_as_compose_says_with_the_journal_password_from_pgpassword(
    image: str, pg_url: str
) -> None:
    """The service's command and environment as compose gives them, run by podman on a read-only root; only the
    database's address (compose's `postgres`) and the listener's port are this machine's."""
    service = interpolated(raw(), {**VARIABLES, "POSTGRES_PASSWORD": PASSWORD})["services"]["checkpoint"]
    environment = dict(service["environment"])
    database = pg_url.rsplit("@", 1)[1]
    environment["CHECKPOINT_SERVE_JOURNAL"] = environment["CHECKPOINT_SERVE_JOURNAL"].replace(
        "@postgres:5432/checkpoint", f"@{database}"
    )
    assert PASSWORD not in environment["CHECKPOINT_SERVE_JOURNAL"]
    port = free_port()
    environment["CHECKPOINT_SERVE_LISTEN"] = f"127.0.0.1:{port}"
    with Container(image, *service["command"], env=environment) as container:
        container.wait_for("listening on")
        health = container.healthcheck()
        assert health.returncode == 0, health.stdout + health.stderr
        assert request(port, "POST", "/mcp", PING).status == 401  # the token of CHECKPOINT_TOKEN is required
        token = {"Authorization": f"Bearer {VARIABLES['CHECKPOINT_TOKEN']}"}
        assert request(port, "GET", "/metrics", headers=token).status == 200
        logs = container.logs()
    assert PASSWORD not in logs
    assert VARIABLES["CHECKPOINT_TOKEN"] not in logs


def haproxy_config(folder: Path, port: int, replicas: list[GatewayProcess], *, sticky: bool) -> Path:
    """deploy/haproxy.cfg with this machine's addresses: the listener on loopback ``port``, and one server line per
    replica where compose's config fills its slots from Docker's DNS. ``sticky=False`` drops the stick rules. Each
    response names the replica that served it (``x-served-by``), for the test to see."""
    text = (DEPLOY / "haproxy.cfg").read_text()
    text = text.replace("    bind :8080\n", f"    bind 127.0.0.1:{port}\n")
    servers = "".join(f"    server gw{n} 127.0.0.1:{r.port} check inter 200ms\n" for n, r in enumerate(replicas))
    text, count = re.subn(r"    server-template .*\n", servers, text)
    assert count == 1
    text += "    http-response set-header x-served-by %[srv_name]\n"
    if not sticky:
        text, count = re.subn(r"    stick.*\n", "", text)
        assert count == 3
    path = folder / f"haproxy-{'sticky' if sticky else 'plain'}.cfg"
    path.write_text(text)
    return path


def through_haproxy(config: Path, port: int) -> tuple[str, list[tuple[int, str]]]:
    """Once HAProxy sends requests to both replicas: open a session through it, then send the session 8 pings; the
    replica that opened it, and each ping's (HTTP status, replica)."""
    haproxy = tool("haproxy")
    assert haproxy is not None, "haproxy is missing: apt-get install haproxy (scripts/test does it)"
    checked = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    process = subprocess.Popen([haproxy, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        seen: set[str] = set()
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while seen != {"gw0", "gw1"}:  # both replicas passed their health checks
            assert time.monotonic() < deadline, f"HAProxy served only {seen}"
            try:
                seen.add(request(port, "GET", "/healthz").headers.get("x-served-by", ""))
            except OSError:
                time.sleep(0.1)
            seen.discard("")
        opened = request(port, "POST", "/mcp", INITIALIZE)
        assert opened.status == 200, opened.body
        session = opened.headers["mcp-session-id"]
        pings = [request(port, "POST", "/mcp", PING, {"Mcp-Session-Id": session}) for _ in range(8)]
        return opened.headers["x-served-by"], [(reply.status, reply.headers["x-served-by"]) for reply in pings]
    finally:
        process.terminate()
        process.wait(DEFAULT_TIMEOUT)
        assert process.stderr is not None
        process.stderr.close()


def test_haproxy_keeps_each_session_on_the_replica_that_opened_it(tmp_path: Path) -> None:
    """Without the stick rules, round robin sends the session's requests to the other replica too, which answers
    404 (a session lives in one replica); with them, every request of the session reaches its replica."""
    env = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    upstream = ("--upstream-cmd", server_cmd("effects_server.py"))
    with GatewayProcess(*upstream, env=env) as one, GatewayProcess(*upstream, env=env) as two:
        port = free_port()
        first, plain = through_haproxy(haproxy_config(tmp_path, port, [one, two], sticky=False), port)
        opener, sticky = through_haproxy(haproxy_config(tmp_path, port, [one, two], sticky=True), port)
    assert {replica for _, replica in plain} == {"gw0", "gw1"}
    assert all((status == 200) == (replica == first) for status, replica in plain)  # 404 from the other one
    assert sticky == [(200, opener)] * 8
