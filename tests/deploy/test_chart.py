"""deploy/helm/checkpoint: linted strictly and rendered offline (helm-python-sdk's bundled Helm), with its defaults
alone and with every switch on, each manifest validated strictly for Kubernetes 1.30 (kubernetes-validate); the
rendered Deployment run by podman as a kubelet would run it."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from containers import ROOT, Container, free_port
from gatewayproc import MODERN, modern_call, request
from pgserver import PASSWORD

from support import SERVERS, done_count

CHART = ROOT / "deploy" / "helm" / "checkpoint"
KUBERNETES = "1.30.0"
JOURNAL = "postgresql://checkpoint:chart-journal-password@db.example:5432/journal"
TOKEN = "chart-gateway-token"
POLICY = '[tools.send_email]\nlimit = { calls = 20, per = "1h" }\n'
EVERY_SWITCH = {
    "journal": {"url": JOURNAL},
    "auth": {"token": TOKEN},
    "auditKey": "chart-audit-key",
    "upstream": {"url": "https://mcp.example.com/mcp", "token": "chart-upstream-token"},
    "policy": POLICY,
    "extraArgs": ["--idle-timeout", "600"],
    "extraEnv": [{"name": "CHECKPOINT_EXTRA", "value": "1"}],
    "podAnnotations": {"example.com/team": "platform"},
    "podDisruptionBudget": {"enabled": True},
    "autoscaling": {"enabled": True},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "service": {"sessionAffinity": "ClientIP"},
}


def rendered(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's manifests, rendered offline as release `gw` in namespace `ns` (NOTES.txt left out)."""
    chart = helm.Chart.load(CHART)
    texts = chart.render(values, name="gw", namespace="ns")
    documents = [yaml.safe_load(text) for path, text in sorted(texts.items()) if path.endswith(".yaml")]
    return [document for document in documents if document]


def one(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [m for m in manifests if m["kind"] == kind]
    return found


def linted(values: dict[str, Any] | None = None) -> None:
    """`helm lint --strict` for Kubernetes 1.30: no error, no warning."""
    report = helm.lint(CHART, values, strict=True, kube_version=f"v{KUBERNETES}")
    assert report["errors"] == [], report
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def validated(manifests: list[dict[str, Any]]) -> None:
    """Each manifest valid for Kubernetes 1.30, strictly (no unknown field); the ServiceMonitor is a CRD's, which
    kubernetes-validate has no schema of: it says so, and the tests check its fields themselves."""
    for manifest in manifests:
        if manifest["kind"] == "ServiceMonitor":
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(manifest, KUBERNETES, strict=True)
            continue
        kubernetes_validate.validate(manifest, KUBERNETES, strict=True)


def pod_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(manifests, "Deployment")["spec"]["template"]["spec"]
    return spec


def test_the_chart_lints_and_renders_a_hardened_deployment_with_its_defaults_alone() -> None:
    linted()
    manifests = rendered()
    validated(manifests)
    assert sorted(m["kind"] for m in manifests) == ["Deployment", "Secret", "Service", "ServiceAccount"]
    deployment = one(manifests, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = pod_of(manifests)
    [container] = pod["containers"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"name": "http", "containerPort": 8808, "protocol": "TCP"} in container["ports"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in pod["volumes"]
    assert "checksum/config" in deployment["spec"]["template"]["metadata"]["annotations"]
    service = one(manifests, "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_every_switch_on_renders_valid_manifests_the_service_monitor_finds_the_service() -> None:
    linted(EVERY_SWITCH)
    manifests = rendered(EVERY_SWITCH)
    validated(manifests)
    kinds = sorted(m["kind"] for m in manifests)
    assert kinds == [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    deployment = one(manifests, "Deployment")
    assert "replicas" not in deployment["spec"]  # the autoscaler owns the count
    assert one(manifests, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert one(manifests, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
    monitor, service = one(manifests, "ServiceMonitor"), one(manifests, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    secret = one(manifests, "Secret")
    credentials = endpoint["authorization"]["credentials"]  # /metrics needs the gateway's token
    assert credentials["name"] == secret["metadata"]["name"]
    assert base64.b64decode(secret["data"][credentials["key"]]).decode() == TOKEN
    pod = pod_of(manifests)
    args = pod["containers"][0]["args"]
    assert args[args.index("--policy") + 1] == "/etc/checkpoint/policy.toml"
    assert one(manifests, "ConfigMap")["data"]["policy.toml"].strip() == POLICY.strip()
    assert args[-2:] == ["--idle-timeout", "600"]


def test_the_journal_url_and_the_tokens_live_in_a_secret_never_in_a_config_map_or_the_arguments() -> None:
    manifests = rendered(EVERY_SWITCH)
    secret = one(manifests, "Secret")
    stored = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
    assert stored == {
        "journal-url": JOURNAL,
        "auth-token": TOKEN,
        "audit-key": "chart-audit-key",
        "upstream-token": "chart-upstream-token",
    }
    elsewhere = json.dumps([m for m in manifests if m["kind"] != "Secret"])
    for value in stored.values():
        assert value not in elsewhere
        assert base64.b64encode(value.encode()).decode() not in elsewhere
    env = {item["name"]: item for item in pod_of(manifests)["containers"][0]["env"]}
    for name, key in [
        ("CHECKPOINT_SERVE_JOURNAL", "journal-url"),
        ("CHECKPOINT_AUTH_TOKEN", "auth-token"),
        ("CHECKPOINT_AUDIT_KEY", "audit-key"),
        ("CHECKPOINT_UPSTREAM_TOKEN", "upstream-token"),
    ]:
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": key}
    # With existingSecret the chart makes no Secret: every reference names the operator's.
    mine = {**EVERY_SWITCH, "existingSecret": "team-checkpoint", "secretKeys": {"auditKey": "hmac"}}
    manifests = rendered(mine)
    validated(manifests)
    assert "Secret" not in {m["kind"] for m in manifests}
    references = [
        item["valueFrom"]["secretKeyRef"] for item in pod_of(manifests)["containers"][0]["env"] if "valueFrom" in item
    ]
    assert {ref["name"] for ref in references} == {"team-checkpoint"}
    assert {ref["key"] for ref in references} == {"journal-url", "auth-token", "hmac"}
    assert (
        one(manifests, "ServiceMonitor")["spec"]["endpoints"][0]["authorization"]["credentials"]["name"]
        == "team-checkpoint"
    )


def test_a_change_of_the_secret_or_the_policy_changes_the_pods_checksum_and_nothing_else_does() -> None:
    def checksum(values: dict[str, Any]) -> str:
        deployment = one(rendered(values), "Deployment")
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    base = checksum(EVERY_SWITCH)
    assert checksum(EVERY_SWITCH) == base
    assert checksum({**EVERY_SWITCH, "auth": {"token": "rotated"}}) != base
    assert checksum({**EVERY_SWITCH, "journal": {"url": JOURNAL.replace("db.example", "db2.example")}}) != base
    assert checksum({**EVERY_SWITCH, "policy": POLICY.replace("20", "10")}) != base
    assert checksum({**EVERY_SWITCH, "replicaCount": 5}) == base


def test_an_issuer_mode_chart_passes_the_identity_provider_s_settings_as_arguments() -> None:
    values = {
        "journal": {"url": JOURNAL},
        "auth": {
            "mode": "issuer",
            "issuer": {
                "url": "https://login.example.com/",
                "audiences": ["https://mcp.example.com/"],
                "jwksUrl": "https://login.example.com/jwks.json",
                "operatorScope": "checkpoint:operator",
            },
        },
        "upstream": {"url": "https://mcp.example.com/mcp"},
    }
    linted(values)
    manifests = rendered(values)
    validated(manifests)
    args = pod_of(manifests)["containers"][0]["args"]
    assert args[:3] == ["serve", "--issuer", "https://login.example.com/"]
    assert "--auth-token-env" not in args
    assert "--audience" in args
    assert "auth-token" not in one(manifests, "Secret")["data"]
    with pytest.raises(helm.HelmError, match=r"auth\.mode must be token, issuer or none"):
        rendered({"auth": {"mode": "open"}})


def test_the_rendered_deployment_runs_in_the_image_as_a_kubelet_would_run_it(
    image: str, pg_url: str, tmp_path: Path
) -> None:
    """The pod's container, rendered with a journal, a token and a policy, run by podman as its kubelet would: the
    image, the arguments, the environment from the Secret's keys, the policy file from the ConfigMap, the user of
    the security context, a read-only root with /tmp writable; the readiness probe's path answers; a call is
    journaled; the port is this machine's (a pod has its own network, the test runs on the host's)."""
    port = free_port()
    effects = tmp_path / "effects"
    effects.mkdir(mode=0o777)
    effects.chmod(0o777)
    values = {
        "journal": {"url": pg_url},
        "auth": {"token": TOKEN},
        "upstream": {"command": "python3 /srv/effects_server.py"},
        "policy": POLICY,
        "containerPort": port,
        "extraEnv": [{"name": "EFFECTS_FILE", "value": "/effects/effects.jsonl"}],
    }
    manifests = rendered(values)
    pod = pod_of(manifests)
    [container] = pod["containers"]
    secret = {key: base64.b64decode(value).decode() for key, value in one(manifests, "Secret")["data"].items()}
    env = {
        item["name"]: item["value"] if "value" in item else secret[item["valueFrom"]["secretKeyRef"]["key"]]
        for item in container["env"]
    }
    assert env["CHECKPOINT_SERVE_JOURNAL"] == pg_url
    files = tmp_path / "configmap"
    files.mkdir()
    for name, text in one(manifests, "ConfigMap")["data"].items():
        (files / name).write_text(text)
    user = pod["securityContext"]
    volumes = (
        f"{files}:/etc/checkpoint:ro",
        f"{SERVERS / 'effects_server.py'}:/srv/effects_server.py:ro",
        f"{effects}:/effects",
    )
    with Container(
        image,
        *container["args"],
        env=env,
        volumes=volumes,
        user=f"{user['runAsUser']}:{user['runAsGroup']}",
    ) as running:
        running.wait_for("listening on")
        readiness = container["readinessProbe"]["httpGet"]["path"]
        assert request(port, "GET", readiness).status == 200
        auth = {"Authorization": f"Bearer {TOKEN}"}
        reply = request(port, "POST", "/w/chart/mcp", modern_call(1, "send_email", {"to": "kim"}), {**MODERN, **auth})
        assert reply.status == 200, reply.body
        assert reply.message()["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
        logs = running.logs()
    assert done_count(effects / "effects.jsonl") == 1
    assert PASSWORD not in logs
    assert TOKEN not in logs


def test_every_value_of_the_chart_is_described_in_its_readme() -> None:
    described = set(re.findall(r"`([A-Za-z][A-Za-z0-9.]*)`", (CHART / "README.md").read_text()))

    def paths(values: dict[str, Any], prefix: str = "") -> list[str]:
        found: list[str] = []
        for key, value in values.items():
            path = f"{prefix}{key}"
            found += paths(value, f"{path}.") if isinstance(value, dict) and value else [path]
        return found

    for path in paths(yaml.safe_load((CHART / "values.yaml").read_text())):
        parts = path.split(".")
        assert any(".".join(parts[:n]) in described for n in range(1, len(parts) + 1)), f"{path} is not in README.md"
