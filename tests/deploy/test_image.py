"""Checkpoint's image, built from `git archive HEAD` with podman and run as a platform runs it: a read-only root, a
tmpfs at /tmp, the image's non-root user, the journal URL in an environment variable."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from checkpoint_mcp.journal.records import CallState
from containers import BASE_IMAGE, Container, free_port, pip_settings, podman, run_once
from gatewayproc import MODERN, initialize, modern_call, request
from pgserver import PASSWORD

from support import SERVERS, done_count, journal_states

IMAGE_USER = 10001
TOKEN = "container-token-never-logged"


def uid_of(container: Container) -> int:
    """The real uid of the container's first process, as the host's kernel sees it."""
    pid = container.inspect("{{.State.Pid}}")
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def shared(tmp_path: Path) -> Path:
    """A folder the container's user may write (its effects file, a SQLite journal)."""
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o777)
    return folder


def gateway(image: str, data: Path, port: int, *args: str, env: dict[str, str] | None = None) -> Container:
    """`checkpoint serve` in a container, in front of the effects server (mounted read-only), on loopback ``port``."""
    return Container(
        image,
        "serve",
        "--upstream-cmd",
        "python3 /srv/effects_server.py",
        *args,
        env={"CHECKPOINT_SERVE_LISTEN": f"127.0.0.1:{port}", "EFFECTS_FILE": "/data/effects.jsonl", **(env or {})},
        volumes=(f"{SERVERS / 'effects_server.py'}:/srv/effects_server.py:ro", f"{data}:/data"),
    )


def test_the_image_runs_checkpoint_as_a_non_root_user_with_a_python_health_check(image: str, tmp_path: Path) -> None:
    [config] = json.loads(podman("image", "inspect", image).stdout)
    settings = config["Config"]
    assert settings["User"] == f"{IMAGE_USER}:{IMAGE_USER}"
    assert settings["Entrypoint"] == ["checkpoint"]
    assert config["Healthcheck"]["Test"] == ["CMD", "python3", "/usr/local/bin/checkpoint-healthcheck"]
    shown = run_once(image, "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"checkpoint {version('checkpoint-mcp')}"
    # Nothing of the build's pip settings, nor of what they named, is left in the image (beyond the base's own).
    mounted = [volume.split(":")[1] for volume in pip_settings(tmp_path)[0][1::2]]
    probe = f"import os; print([p for p in {mounted!r} if os.path.exists(p)])"
    found = {name: run_once(name, "-c", probe, entrypoint="python3").stdout.strip() for name in (image, BASE_IMAGE)}
    assert found[image] == found[BASE_IMAGE], found
    # The postgres extra is in: the driver imports on the read-only root (no bytecode written beside it).
    probe = run_once(image, "journal", "ls", "--journal", "postgresql://nobody@127.0.0.1:1/none")
    assert "psycopg" not in probe.stderr
    assert "cannot connect to journal" in probe.stderr or "cannot open journal" in probe.stderr, probe.stderr


def test_serve_in_the_image_journals_a_call_on_a_read_only_root_and_answers_its_health_check(
    image: str, tmp_path: Path
) -> None:
    data = shared(tmp_path)
    port = free_port()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    secured = ("--journal", "/data/j.db", "--auth-token-env", "GW_TOKEN")
    with gateway(image, data, port, *secured, env={"GW_TOKEN": TOKEN}) as container:
        container.wait_for("listening on")
        assert uid_of(container) == IMAGE_USER
        health = container.healthcheck()  # the image's HEALTHCHECK, run in the container: /healthz without a token
        assert health.returncode == 0, health.stdout + health.stderr
        assert request(port, "GET", "/healthz").json() == {"status": "ok"}  # behind a token: the status alone
        call = modern_call(1, "send_email", {"to": "ann"}, checkpoint_seq=1)
        first = request(port, "POST", "/w/orders/mcp", call, {**MODERN, **auth}, timeout=60)
        assert first.status == 200, first.body
        again = request(port, "POST", "/w/orders/mcp", call, {**MODERN, **auth}, timeout=60)
        assert again.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert request(port, "POST", "/w/orders/mcp", call, MODERN).status == 401
        code = container.stop()
        logs = container.logs()
    assert code == 143  # SIGTERM drained: what a platform sends first
    assert first.message()["result"]["content"][0]["text"] == "sent to ann"
    assert done_count(data / "effects.jsonl") == 1
    assert journal_states(str(data / "j.db"), "orders") == {1: CallState.COMPLETED}
    assert TOKEN not in logs


def test_two_containers_on_one_postgresql_journal_replay_each_other_s_call_once(
    image: str, pg_url: str, tmp_path: Path
) -> None:
    """Two replicas started at once on a fresh database (both migrate it at start), no affinity: a call through one
    is replayed by the other; a session opened on one is unknown to the other (why session-era clients need a
    sticky load balancer); the fresh token of the pages reaches neither log."""
    data = shared(tmp_path)
    ports = free_port(), free_port()
    env = {"CHECKPOINT_SERVE_JOURNAL": pg_url}
    with gateway(image, data, ports[0], env=env) as a, gateway(image, data, ports[1], env=env) as b:
        for replica in (a, b):
            replica.wait_for("listening on")
            assert replica.healthcheck().returncode == 0
        call = modern_call(1, "send_email", {"to": "bob"}, checkpoint_seq=1)
        first = request(ports[0], "POST", "/w/fleet/mcp", call, MODERN, timeout=60)
        assert first.status == 200, first.body
        replayed = request(
            ports[1],
            "POST",
            "/w/fleet/mcp",
            modern_call(2, "send_email", {"to": "bob"}, checkpoint_seq=1),
            MODERN,
            timeout=60,
        )
        assert replayed.status == 200, replayed.body
        session = initialize(ports[0])
        elsewhere = request(
            ports[1], "POST", "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, {"Mcp-Session-Id": session}
        )
        logs = a.logs() + b.logs()
    assert first.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
    assert replayed.message()["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert replayed.message()["result"]["content"] == first.message()["result"]["content"]
    assert done_count(data / "effects.jsonl") == 1
    assert elsewhere.status == 404
    assert "the journal's pages at" in logs
    assert "token=" not in logs
    assert PASSWORD not in logs  # the journal's password, given in the environment
